import pytest

from app.conventions.models import Convention
from app.conventions.recall import (
    normalize_directory,
    parent_chain,
    recall_conventions,
    search_conventions,
)


def conv(content: str, directory: str | None = None, language: str = "python") -> Convention:
    return Convention(language=language, directory=directory, content=content)


@pytest.mark.parametrize(
    ("directory", "chain"),
    [
        ("src/api/handlers", ["src/api/handlers", "src/api", "src", ""]),
        ("./src/api/handlers/", ["src/api/handlers", "src/api", "src", ""]),
        ("src\\api\\handlers", ["src/api/handlers", "src/api", "src", ""]),
        ("/src/api", ["src/api", "src", ""]),
        ("src//api/./v1", ["src/api/v1", "src/api", "src", ""]),
        ("src/api/../lib", ["src/lib", "src", ""]),
        ("src", ["src", ""]),
        ("", [""]),
        (".", [""]),
        ("./", [""]),
        ("/", [""]),
        ("  src/x  ", ["src/x", "src", ""]),
    ],
)
def test_parent_chain(directory: str, chain: list[str]) -> None:
    assert parent_chain(directory) == chain


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [("", ""), (".", ""), ("./", ""), ("/", ""), ("a/b/", "a/b"), ("a\\b", "a/b"), ("..", "")],
)
def test_normalize_directory(raw: str, normalized: str) -> None:
    assert normalize_directory(raw) == normalized


ROWS = [
    conv("Use black formatting", None),
    conv("Handlers return typed responses", "src/api/handlers"),
    conv("Root rule: no print statements", ""),
    conv("API modules validate input", "src/api"),
    conv("Source code is typed", "src"),
    conv("Handlers log request ids", "src/api/handlers/"),
    conv("Sibling rule", "src/web"),
    conv("Deeper rule", "src/api/handlers/v2"),
    conv("Go rule", "src/api", language="go"),
]


def test_walks_directory_then_parents_then_root_then_language() -> None:
    lines = recall_conventions(ROWS, language="python", directory="src/api/handlers", limit=10)
    assert lines == [
        "- [src/api/handlers] Handlers return typed responses",
        "- [src/api/handlers] Handlers log request ids",
        "- [src/api] API modules validate input",
        "- [src] Source code is typed",
        "- [.] Root rule: no print statements",
        "- [python] Use black formatting",
    ]


def test_limit_truncates_nearest_first() -> None:
    lines = recall_conventions(ROWS, language="python", directory="src/api/handlers", limit=3)
    assert lines == [
        "- [src/api/handlers] Handlers return typed responses",
        "- [src/api/handlers] Handlers log request ids",
        "- [src/api] API modules validate input",
    ]


def test_default_limit_is_five() -> None:
    lines = recall_conventions(ROWS, language="python", directory="src/api/handlers")
    assert len(lines) == 5


@pytest.mark.parametrize("limit", [0, -1])
def test_non_positive_limit_returns_nothing(limit: int) -> None:
    assert recall_conventions(ROWS, language="python", directory="src", limit=limit) == []


def test_dedupe_by_content_first_wins() -> None:
    rows = [
        conv("Shared rule", None),
        conv("Shared rule", "src"),
        conv("Shared rule", "src/api"),
        conv("Only root", "."),
    ]
    lines = recall_conventions(rows, language="python", directory="src/api", limit=5)
    assert lines == ["- [src/api] Shared rule", "- [.] Only root"]


def test_other_languages_and_unrelated_directories_are_ignored() -> None:
    lines = recall_conventions(ROWS, language="go", directory="src/api/handlers", limit=10)
    assert lines == ["- [src/api] Go rule"]


def test_language_matches_case_insensitively() -> None:
    lines = recall_conventions(ROWS, language="Python", directory="src/web", limit=10)
    assert lines[0] == "- [src/web] Sibling rule"


def test_without_directory_only_language_level() -> None:
    assert recall_conventions(ROWS, language="python", directory=None) == [
        "- [python] Use black formatting"
    ]


def test_messy_directory_argument_is_normalized() -> None:
    lines = recall_conventions(ROWS, language="python", directory=".\\src\\api\\", limit=2)
    assert lines == ["- [src/api] API modules validate input", "- [src] Source code is typed"]


SEARCH_ROWS = [
    conv("Use pytest fixtures for database sessions", "tests"),
    conv("Prefer dataclasses for payloads", None),
    conv("Database migrations go through Alembic", "migrations"),
    conv("React components use hooks", "web", language="typescript"),
    conv("Name tests after the behaviour", "tests"),
]


@pytest.mark.parametrize(
    ("query", "expected_first"),
    [
        ("database", "Database migrations go through Alembic"),
        ("pytest fixtures", "Use pytest fixtures for database sessions"),
        ("typescript", "React components use hooks"),
        ("dataclass payloads", "Prefer dataclasses for payloads"),
        ("alembic migrations", "Database migrations go through Alembic"),
        ("migratons", "Database migrations go through Alembic"),
    ],
)
def test_search_ranks_best_match_first(query: str, expected_first: str) -> None:
    lines = search_conventions(SEARCH_ROWS, query, 5)
    assert lines
    assert lines[0].endswith(expected_first)


def test_search_filters_unrelated_rows_and_respects_limit() -> None:
    lines = search_conventions(SEARCH_ROWS, "database", 5)
    assert all("atabase" in line for line in lines)
    assert len(lines) == 2
    assert len(search_conventions(SEARCH_ROWS, "database", 1)) == 1


def test_search_matches_directory_and_uses_line_format() -> None:
    assert search_conventions(SEARCH_ROWS, "tests", 5) == [
        "- [tests] Name tests after the behaviour",
        "- [tests] Use pytest fixtures for database sessions",
    ]


@pytest.mark.parametrize(
    ("query", "limit", "expected"),
    [
        ("quantum chromodynamics", 5, []),
        ("database", 0, []),
        (
            "",
            2,
            [
                "- [tests] Use pytest fixtures for database sessions",
                "- [python] Prefer dataclasses for payloads",
            ],
        ),
    ],
)
def test_search_edge_cases(query: str, limit: int, expected: list[str]) -> None:
    assert search_conventions(SEARCH_ROWS, query, limit) == expected


def test_search_on_no_rows() -> None:
    assert search_conventions([], "anything", 5) == []
