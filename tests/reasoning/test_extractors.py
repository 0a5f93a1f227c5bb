from collections.abc import Sequence

import pytest

from app.agents.config import CustomPattern
from app.reasoning.extractors import Reference, extract_references


def _pairs(
    text: str, *, custom_patterns: Sequence[CustomPattern] = (), max_references: int = 10
) -> list[tuple[str, str]]:
    found = extract_references(text, custom_patterns=custom_patterns, max_references=max_references)
    return [(r.ref_type, r.value) for r in found]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("nothing here", []),
        ("see https://example.com/a?b=1 now", [("url", "https://example.com/a?b=1")]),
        (
            "(http://x.dev/path) and <https://y.dev/q>",
            [("url", "http://x.dev/path"), ("url", "https://y.dev/q")],
        ),
        ("[doc](https://x.dev/docs)", [("url", "https://x.dev/docs")]),
        ("ends a sentence https://x.dev/a.", [("url", "https://x.dev/a")]),
        (
            "list: https://x.dev/a, https://x.dev/b;",
            [("url", "https://x.dev/a"), ("url", "https://x.dev/b")],
        ),
        ("ftp://x.dev/a is not http", []),
        ("edit ./src/app.py please", [("file", "./src/app.py")]),
        ("./README.md at start", [("file", "./README.md")]),
        (
            "open ~/notes/todo.txt and /etc/hosts.conf",
            [("file", "~/notes/todo.txt"), ("file", "/etc/hosts.conf")],
        ),
        ("line one\n../lib/util-2.ts", [("file", "../lib/util-2.ts")]),
        ("no dot path ./src/app", []),
        ("inside(./src/app.py)", []),
        ("fix #42", [("issue", "42")]),
        ("fix #42 and #7", [("issue", "42"), ("issue", "7")]),
        ("review PR #12", [("pr", "12")]),
        ("review pr#12 and Pr  #13", [("pr", "12"), ("pr", "13")]),
        ("APR #5 is not a PR", [("issue", "5")]),
        ("PR #12 closes #12 and #9", [("pr", "12"), ("issue", "9")]),
        ("#3 then PR #4", [("pr", "4"), ("issue", "3")]),
    ],
)
def test_builtin_extractors(text: str, expected: list[tuple[str, str]]) -> None:
    assert _pairs(text) == expected


def test_spec_order_url_file_pr_issue_then_custom() -> None:
    text = "#1 JIRA-7 PR #2 ./a.py https://x.dev"
    patterns = [CustomPattern(ref_type="jira", pattern=r"JIRA-\d+")]
    assert extract_references(text, custom_patterns=patterns) == [
        Reference("url", "https://x.dev"),
        Reference("file", "./a.py"),
        Reference("pr", "2"),
        Reference("issue", "1"),
        Reference("jira", "JIRA-7"),
    ]


def test_url_fragment_number_is_not_an_issue() -> None:
    text = "see https://example.com/page#123 and #456"
    assert _pairs(text) == [("url", "https://example.com/page#123"), ("issue", "456")]


def test_trimmed_url_fragment_still_not_an_issue() -> None:
    assert _pairs("at https://x.dev/p#9.") == [("url", "https://x.dev/p#9")]


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"[A-Z]+-\d+", "fix ABC-12 and XY-3", [("ticket", "ABC-12"), ("ticket", "XY-3")]),
        (r"ticket:(\w+)", "ticket:abc ticket:def", [("ticket", "abc"), ("ticket", "def")]),
        (r"(?:id|no)=\d+", "id=5 no=6", [("ticket", "id=5"), ("ticket", "no=6")]),
        (r"id=(\d+)", "id=5", [("ticket", "5")]),
        (r"(a)|(b)", "b a", [("ticket", "a")]),
        (r"x*", "abc", []),
    ],
)
def test_custom_patterns(pattern: str, text: str, expected: list[tuple[str, str]]) -> None:
    patterns = [CustomPattern(ref_type="ticket", pattern=pattern)]
    assert _pairs(text, custom_patterns=patterns) == expected


def test_custom_patterns_keep_their_configured_order() -> None:
    patterns = [
        CustomPattern(ref_type="second", pattern=r"S\d"),
        CustomPattern(ref_type="first", pattern=r"F\d"),
    ]
    assert _pairs("F1 S1", custom_patterns=patterns) == [("second", "S1"), ("first", "F1")]


def test_dedupe_by_value_first_wins() -> None:
    text = "https://x.dev https://x.dev #4 #4 ./a.py ./a.py"
    patterns = [CustomPattern(ref_type="link", pattern=r"https://\S+")]
    assert _pairs(text, custom_patterns=patterns) == [
        ("url", "https://x.dev"),
        ("file", "./a.py"),
        ("issue", "4"),
    ]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (0, []),
        (1, [("url", "https://x.dev")]),
        (3, [("url", "https://x.dev"), ("file", "./a.py"), ("issue", "1")]),
        (10, [("url", "https://x.dev"), ("file", "./a.py"), ("issue", "1"), ("issue", "2")]),
    ],
)
def test_max_references(limit: int, expected: list[tuple[str, str]]) -> None:
    assert _pairs("#1 #2 ./a.py https://x.dev #1", max_references=limit) == expected


def test_default_max_references_is_ten() -> None:
    text = " ".join(f"#{n}" for n in range(1, 20))
    assert len(extract_references(text)) == 10
