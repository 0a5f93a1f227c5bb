from dataclasses import dataclass

import pytest

from app.agents.config import ToolProfile
from app.reasoning.profile import apply_profile, glob_match


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""


def _names(tools: list[Tool], profile: ToolProfile) -> list[str]:
    kept = apply_profile(tools, profile, name=lambda t: t.name, description=lambda t: t.description)
    return [t.name for t in kept]


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("web_*", "web_search", True),
        ("web_*", "web_", True),
        ("web_*", "my_web_search", False),
        ("web_*", "Web_search", False),
        ("tool_?", "tool_a", True),
        ("tool_?", "tool_", False),
        ("tool_?", "tool_ab", False),
        ("read_skill", "read_skill", True),
        ("read_skill", "read_skills", False),
        ("read_skill", "xread_skill", False),
        ("*", "anything", True),
        ("*", "", True),
        ("a*b*c", "a__b__c", True),
        ("a*b*c", "a__c__b", False),
        ("[ab]", "[ab]", True),
        ("[ab]", "a", False),
        ("x[!y]", "x[!y]", True),
        ("x[!y]", "xz", False),
        ("git.hub", "gitXhub", False),
        ("git.hub", "git.hub", True),
        ("a+b", "a+b", True),
        ("jira__*", "jira__create_issue", True),
        ("*__query", "sales__query", True),
    ],
)
def test_glob_match(pattern: str, name: str, expected: bool) -> None:
    assert glob_match(pattern, name) is expected


TOOLS = [
    Tool("web_search", "Search [verified]"),
    Tool("web_fetch", "Fetch a page"),
    Tool("jira__create_issue", "Create [verified]"),
    Tool("jira__delete_issue", "Delete [verified]"),
    Tool("db_query", "Query [Verified]"),
    Tool("tool_a", "[verified] first"),
]


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        (ToolProfile(), [t.name for t in TOOLS]),
        (ToolProfile(include=["web_*"]), ["web_search", "web_fetch"]),
        (
            ToolProfile(include=["web_*", "jira__*"]),
            ["web_search", "web_fetch", "jira__create_issue", "jira__delete_issue"],
        ),
        (
            ToolProfile(exclude=["*delete*"]),
            ["web_search", "web_fetch", "jira__create_issue", "db_query", "tool_a"],
        ),
        (
            ToolProfile(include=["jira__*"], exclude=["jira__delete_*"]),
            ["jira__create_issue"],
        ),
        (ToolProfile(include=["web_*"], exclude=["web_*"]), []),
        (
            ToolProfile(require_verified=True),
            ["web_search", "jira__create_issue", "jira__delete_issue", "tool_a"],
        ),
        (ToolProfile(include=["web_*"], require_verified=True), ["web_search"]),
        (ToolProfile(max_tools=2), ["web_search", "web_fetch"]),
        (ToolProfile(max_tools=0), []),
        (ToolProfile(max_tools=100), [t.name for t in TOOLS]),
        (
            ToolProfile(exclude=["web_*"], require_verified=True, max_tools=2),
            ["jira__create_issue", "jira__delete_issue"],
        ),
        (ToolProfile(include=["nothing_matches"]), []),
    ],
)
def test_profile_pipeline(profile: ToolProfile, expected: list[str]) -> None:
    assert _names(TOOLS, profile) == expected


def test_cap_keeps_input_order_not_include_order() -> None:
    tools = [Tool("b_1"), Tool("a_1"), Tool("b_2"), Tool("a_2")]
    profile = ToolProfile(include=["a_*", "b_*"], max_tools=3)
    assert _names(tools, profile) == ["b_1", "a_1", "b_2"]


def test_cap_applies_after_filters() -> None:
    tools = [Tool("x_1"), Tool("keep_1", "[verified]"), Tool("x_2"), Tool("keep_2", "[verified]")]
    assert _names(tools, ToolProfile(require_verified=True, max_tools=1)) == ["keep_1"]
