from typing import Any

import pytest

from app.agents.config import StepIteration
from app.events import StepLimitReached
from app.reasoning.progress import (
    Continue,
    ProgressTracker,
    Stop,
    format_similarity,
    format_threshold,
    step_id_for,
)
from app.reasoning.similarity import similarity

STEP = "connector:jira/create_issue"
ERRORS = [
    "HTTP 401 Unauthorized: token expired",
    "Validation failed: field 'summary' is required",
    "Connection refused by upstream host",
    "Timeout after 30s while reading response",
]


def test_defaults_match_spec() -> None:
    config = StepIteration()
    assert config.max_reattempts_per_step == 2
    assert config.similarity_threshold == 0.85
    assert config.on_limit_reached == "skip_step"


def test_first_failure_continues() -> None:
    tracker = ProgressTracker(StepIteration())
    assert tracker.record_failure(STEP, ERRORS[0]) == Continue(step_id=STEP, attempts=1)


@pytest.mark.parametrize("maximum", [1, 2, 3, 4])
def test_stops_when_attempts_reach_max_with_different_errors(maximum: int) -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=maximum))
    decisions = [tracker.record_failure(STEP, error) for error in ERRORS[:maximum]]
    assert all(isinstance(d, Continue) for d in decisions[:-1])
    assert decisions[-1] == Stop(
        step_id=STEP,
        attempts=maximum,
        reason=f"Step 'connector:jira/create_issue' reached max reattempts ({maximum})",
    )


def test_stops_at_once_on_near_identical_errors() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=10))
    first = "Error 500 from upstream: request id abc123"
    second = "Error 500 from upstream: request id abc124"
    assert isinstance(tracker.record_failure(STEP, first), Continue)
    decision = tracker.record_failure(STEP, second)
    score = similarity(first, second)
    assert isinstance(decision, Stop)
    assert decision.attempts == 2
    assert decision.similarity == pytest.approx(score)
    assert decision.reason == (
        "Step 'connector:jira/create_issue' appears stuck: consecutive errors are "
        f"{score * 100:.1f}% similar (threshold: 85%)"
    )
    assert decision.reason.endswith("are 97.6% similar (threshold: 85%)")


def test_identical_errors_report_100_percent() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=5, similarity_threshold=0.9))
    tracker.record_failure("mcp:github/search", "rate limited")
    decision = tracker.record_failure("mcp:github/search", "rate limited")
    assert isinstance(decision, Stop)
    assert decision.reason == (
        "Step 'mcp:github/search' appears stuck: consecutive errors are 100.0% similar "
        "(threshold: 90%)"
    )


def test_continues_on_different_errors_below_max() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=4))
    decisions = [tracker.record_failure(STEP, error) for error in ERRORS[:3]]
    assert decisions == [Continue(step_id=STEP, attempts=n) for n in (1, 2, 3)]


@pytest.mark.parametrize(
    ("threshold", "stops"),
    [(0.5, True), (0.8, True), (0.81, False), (1.0, False)],
)
def test_threshold_is_inclusive(threshold: float, stops: bool) -> None:
    # "abcde" vs "abcdx": distance 1 over 5 → exactly 0.8.
    tracker = ProgressTracker(
        StepIteration(max_reattempts_per_step=10, similarity_threshold=threshold)
    )
    tracker.record_failure("s", "abcde")
    assert isinstance(tracker.record_failure("s", "abcdx"), Stop) is stops


def test_stuck_check_wins_when_both_hold() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=2))
    tracker.record_failure(STEP, "boom")
    decision = tracker.record_failure(STEP, "boom")
    assert isinstance(decision, Stop)
    assert "appears stuck" in decision.reason
    assert decision.attempts == 2


def test_success_resets_the_step() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=2))
    tracker.record_failure(STEP, "boom")
    assert tracker.attempts(STEP) == 1
    tracker.record_success(STEP)
    assert tracker.attempts(STEP) == 0
    # Same error again: no previous error to compare with, one attempt only.
    assert tracker.record_failure(STEP, "boom") == Continue(step_id=STEP, attempts=1)


def test_steps_are_tracked_independently() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=2))
    tracker.record_failure("a", "same error")
    assert isinstance(tracker.record_failure("b", "same error"), Continue)
    tracker.record_success("b")
    assert isinstance(tracker.record_failure("a", "same error"), Stop)


def test_similarity_compares_with_previous_error_only() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=10))
    tracker.record_failure(STEP, "alpha alpha alpha")
    tracker.record_failure(STEP, "completely different failure")
    decision = tracker.record_failure(STEP, "alpha alpha alpha")
    assert decision == Continue(step_id=STEP, attempts=3)


def test_stop_builds_step_limit_event() -> None:
    tracker = ProgressTracker(StepIteration(max_reattempts_per_step=1))
    decision = tracker.record_failure("http_fetch", "404")
    assert isinstance(decision, Stop)
    assert decision.event("abort_task") == StepLimitReached(
        step_id="http_fetch",
        attempts=1,
        reason="Step 'http_fetch' reached max reattempts (1)",
        action="abort_task",
    )


@pytest.mark.parametrize(
    ("value", "similarity_text", "threshold_text"),
    [
        (0.85, "85.0", "85"),
        (0.855, "85.5", "85.5"),
        (0.9234, "92.3", "92.3"),
        (1.0, "100.0", "100"),
        (0.0, "0.0", "0"),
        (0.07, "7.0", "7"),
    ],
)
def test_percentage_formatting(value: float, similarity_text: str, threshold_text: str) -> None:
    assert format_similarity(value) == similarity_text
    assert format_threshold(value) == threshold_text


@pytest.mark.parametrize(
    ("tool", "arguments", "kind", "expected"),
    [
        (
            "connector",
            {"subcommand": "execute", "connector": "jira", "action": "create_issue"},
            "meta",
            "connector:jira/create_issue",
        ),
        ("connector", {"subcommand": "discover", "connector": "jira"}, "meta", "connector:jira"),
        ("connector", {"subcommand": "execute"}, "meta", "connector"),
        (
            "mcp",
            {"subcommand": "call", "server": "github", "tool": "search", "parameters": {}},
            "meta",
            "mcp:github/search",
        ),
        ("mcp", {"subcommand": "discover", "server": "github"}, "meta", "mcp:github"),
        (
            "database",
            {"subcommand": "query", "database": "sales", "sql": "select 1"},
            "meta",
            "database:sales/query",
        ),
        (
            "database",
            {"subcommand": "list_tables", "database": "sales"},
            "meta",
            "database:sales/list_tables",
        ),
        ("read_skill", {"name": "deploy"}, "meta", "skill:deploy"),
        ("read_skill", {}, "meta", "read_skill"),
        ("jira__create_issue", {"summary": "x"}, "connector", "jira__create_issue"),
        ("github__search", {"q": "x"}, "mcp", "github__search"),
        ("http_fetch", {"url": "https://x"}, "builtin", "http_fetch"),
        # A non-meta tool that happens to be called "database" is just a tool name.
        ("database", {"database": "sales", "subcommand": "query"}, "builtin", "database"),
        (
            "connector",
            {"connector": 3, "action": "x", "subcommand": "execute"},
            "meta",
            "connector",
        ),
    ],
)
def test_step_id_for(tool: str, arguments: dict[str, Any], kind: str, expected: str) -> None:
    assert step_id_for(tool, arguments, kind) == expected


@pytest.mark.parametrize(
    ("tool", "kind", "target", "expected"),
    [
        (
            "jira__create_issue",
            "connector",
            "connector:jira/create_issue",
            "connector:jira/create_issue",
        ),
        ("sales__query", "database", "database:sales/query", "database:sales/query"),
        ("github__search", "mcp", "mcp:github/search", "mcp:github/search"),
        ("http_fetch", "builtin", "", "http_fetch"),
    ],
)
def test_step_id_for_legacy_tools_uses_their_target(
    tool: str, kind: str, target: str, expected: str
) -> None:
    assert step_id_for(tool, {"q": "x"}, kind, target=target) == expected


def test_meta_tool_ignores_its_generic_target_when_arguments_name_the_resource() -> None:
    arguments = {"subcommand": "call", "server": "github", "tool": "search"}
    assert step_id_for("mcp", arguments, "mcp", target="mcp") == "mcp:github/search"
    assert step_id_for("mcp", {"subcommand": "call"}, "mcp", target="mcp") == "mcp"
