from __future__ import annotations

from typing import Any

import pytest

from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.combined import CombinedToolset, ToolNameClash
from app.tools.function import FunctionTool, FunctionToolset
from app.tools.guard import safe_call, scrub
from app.tools.wrappers import ActiveSetToolset, FilteredToolset
from tests.fixtures.pipeline import ctx


def _echo(name: str) -> FunctionTool:
    async def handle(args: dict[str, Any], c: CallContext) -> ToolResult:
        return ToolResult.success(f"{name}:{sorted(args)}")

    return FunctionTool(tool=ToolDef(name=name, description=f"{name} tool"), handler=handle)


def _source(label: str, *names: str) -> FunctionToolset:
    return FunctionToolset([_echo(n) for n in names], label=label)


def test_combined_merges_sources_in_order() -> None:
    combined = CombinedToolset([_source("a", "one", "two"), _source("b", "three")])
    assert list(combined.list_tools()) == ["one", "two", "three"]


async def test_combined_routes_calls_to_the_owner() -> None:
    combined = CombinedToolset([_source("a", "one"), _source("b", "three")])
    result = await combined.call_tool("three", {"x": 1}, ctx())
    assert result.output == "three:['x']"


def test_combined_reports_a_name_clash_precisely() -> None:
    with pytest.raises(ToolNameClash) as err:
        CombinedToolset([_source("connectors", "jira__get"), _source("mcp", "jira__get")])
    assert err.value.message == "Tool name 'jira__get' is provided by both 'connectors' and 'mcp'"


def test_function_toolset_refuses_duplicates() -> None:
    with pytest.raises(ValueError, match="duplicate tool 'x' in 'src'"):
        FunctionToolset([_echo("x"), _echo("x")], label="src")


async def test_filtered_hides_and_refuses() -> None:
    inner = _source("a", "keep", "drop")
    filtered = FilteredToolset(inner, lambda t: t.name == "keep", reason="excluded by profile")
    assert list(filtered.list_tools()) == ["keep"]
    refused = await filtered.call_tool("drop", {}, ctx())
    assert refused.error == "Tool 'drop' is not available to this agent (excluded by profile)"
    assert (await filtered.call_tool("keep", {}, ctx())).ok


async def test_active_set_grows_and_refuses_unloaded_tools() -> None:
    active = ActiveSetToolset(_source("a", "t1", "t2", "t3"), ["t2", "nope"])
    assert list(active.list_tools()) == ["t2"]
    assert [t.name for t in active.deferred()] == ["t1", "t3"]
    refused = await active.call_tool("t3", {}, ctx())
    assert refused.error == (
        "Tool 't3' is not loaded yet; call request_tools with tool_names=['t3'] first,"
        " then call it."
    )
    activation = active.activate(["t3", "t2", "t4", "t3"])
    assert activation.loaded == ("t3",)
    assert activation.already == ("t2",)
    assert activation.not_found == (("t4", None),)
    assert list(active.list_tools()) == ["t2", "t3"]
    assert (await active.call_tool("t3", {}, ctx())).ok


class _Exploding(FunctionToolset):
    def __init__(self, exc: Exception) -> None:
        super().__init__([_echo("boom")], label="exploding")
        self.exc = exc

    async def call_tool(self, name: str, args: dict[str, Any], c: CallContext) -> ToolResult:
        raise self.exc


async def test_safe_call_turns_exceptions_into_typed_failures() -> None:
    result = await safe_call(_Exploding(KeyError("missing")), "boom", {}, ctx())
    assert not result.ok
    assert result.error == "Tool 'boom' failed unexpectedly (KeyError): 'missing'"
    assert result.retryable is False


async def test_safe_call_marks_timeouts_retryable_and_hides_credentials() -> None:
    exc = TimeoutError("connect to postgresql://admin:hunter2@db:5432/app timed out")
    result = await safe_call(_Exploding(exc), "boom", {}, ctx())
    assert result.retryable is True
    assert result.error is not None
    assert "hunter2" not in result.error
    assert "postgresql://***@db:5432/app" in result.error


def test_scrub_caps_long_messages() -> None:
    assert len(scrub("x" * 1000)) == 300
