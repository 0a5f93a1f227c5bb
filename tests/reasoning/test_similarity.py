import pytest

from app.reasoning.similarity import levenshtein, similarity


@pytest.mark.parametrize(
    ("a", "b", "distance"),
    [
        ("kitten", "sitting", 3),
        ("", "", 0),
        ("a", "", 1),
        ("", "abc", 3),
        ("flaw", "lawn", 2),
        ("same", "same", 0),
        ("日本語", "日本", 1),
        ("🎉x", "🎊x", 1),
    ],
)
def test_levenshtein_counts_character_edits(a: str, b: str, distance: int) -> None:
    assert levenshtein(a, b) == distance
    assert levenshtein(b, a) == distance


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("kitten", "sitting", 1 - 3 / 7),
        ("", "", 1.0),
        ("a", "", 0.0),
        ("", "a", 0.0),
        ("abc", "abc", 1.0),
        ("abc", "xyz", 0.0),
        ("flaw", "lawn", 0.5),
        ("日本語", "日本", 2 / 3),
    ],
)
def test_similarity_is_one_minus_distance_over_longer_length(
    a: str, b: str, expected: float
) -> None:
    assert similarity(a, b) == pytest.approx(expected)


def test_kitten_sitting_is_about_57_percent() -> None:
    assert round(similarity("kitten", "sitting"), 3) == 0.571
