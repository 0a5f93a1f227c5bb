"""Runtime selection (docs/contract.md §4.4): top-k kept, the rest behind request_tools."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from app.agents.models import Agent
from app.config import SelectionStrategy
from app.pipeline.assemble import assemble_toolset
from app.pipeline.selection import LlmSelector, needs_selection, select_tools
from app.pipeline.sources.backends import Backends
from app.tools.base import ToolDef
from tests.fixtures.pipeline import (
    ctx,
    make_agent,
    make_settings,
    make_skill,
    work_connectors,
)

LEGACY = {"connector_tool_mode": "legacy", "tool_selection_threshold": 5, "tool_selection_max": 3}
LONG = "Send a message to a Slack channel as the bot user, with optional thread and blocks payload."


def _agent(config: dict[str, object] | None = None) -> Agent:
    return make_agent(
        connectors=work_connectors(post_message=LONG),
        skills=[make_skill("triage", "Triage a bug.", "Steps.")],
        config={**LEGACY, **(config or {})},
        tool_categories=["connector", "skill"],
    )


def test_needs_selection_only_above_the_threshold() -> None:
    assert not needs_selection(12, 12)
    assert needs_selection(13, 12)


async def test_at_or_below_threshold_every_tool_stays(backends: Backends) -> None:
    toolset = await assemble_toolset(
        _agent({"tool_selection_threshold": 7}), make_settings(), backends, "jira"
    )
    assert toolset.selection is None
    assert len(toolset.tools) == 7


async def test_selection_keeps_top_k_and_lists_the_rest(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "search jira issues")
    selection = toolset.selection
    assert selection is not None
    assert selection.strategy is SelectionStrategy.HYBRID
    assert selection.total == 7
    assert selection.pinned == ("read_skill",)
    assert len(selection.selected) == 3
    assert selection.selected[0] == "jira__search_issues"
    assert set(selection.deferred) == {
        "jira__create_issue",
        "jira__get_issue",
        "slack__post_message",
        "slack__list_channels",
        "weather__forecast",
    } - set(selection.selected)
    names = [t.name for t in toolset.tools]
    assert names == [
        *[n for n in names if n in selection.selected],
        "read_skill",
        "request_tools",
    ]
    catalog = toolset.tools[-1].description.splitlines()
    assert catalog[0].startswith("Load more tools for this task: tool_names loads them")
    assert catalog[1] == "3 tools not loaded yet:"
    assert sorted(catalog[2:]) == sorted(
        [
            f"- {t.name}: "
            f"{t.description[:77] + '...' if len(t.description) > 80 else t.description}"
            for t in toolset.full_tools().values()
            if t.name in selection.deferred
        ]
    )
    assert "- slack__post_message: " + LONG[:77] + "..." in catalog


async def test_request_tools_loads_for_the_rest_of_the_run(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "search jira issues")
    assert toolset.selection is not None
    refused = await toolset.call("weather__forecast", {}, ctx())
    assert refused.error == (
        "Tool 'weather__forecast' is not loaded yet; call request_tools with"
        " tool_names=['weather__forecast'] first, then call it."
    )
    result = await toolset.call(
        "request_tools",
        {"tool_names": ["weather__forecast", "jira__search_issues", "slack__post_mesage"]},
        ctx(),
    )
    assert result.ok
    assert result.output == (
        "Loaded: weather__forecast\n"
        "Already loaded: jira__search_issues\n"
        "Not found: slack__post_mesage (did you mean 'slack__post_message'?)"
    )
    assert result.loaded_tools == ("weather__forecast",)
    assert "weather__forecast" in [t.name for t in toolset.tools]
    assert "- weather__forecast:" not in toolset.tools[-1].description
    assert (await toolset.call("weather__forecast", {}, ctx())).ok


async def test_request_tools_with_only_unknown_names_fails(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "jira")
    result = await toolset.call("request_tools", {"tool_names": ["nope"]}, ctx())
    assert not result.ok
    assert result.error == "Not found: nope"
    bad = await toolset.call("request_tools", {"tool_names": []}, ctx())
    assert bad.error == "Invalid arguments for 'request_tools': tool_names: [] should be non-empty"


async def test_activate_replays_loaded_tools(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "jira")
    activation = toolset.activate(["weather__forecast"])
    assert activation.loaded == ("weather__forecast",)
    assert "weather__forecast" in [t.name for t in toolset.tools]


async def test_when_everything_is_loaded_the_catalog_says_so(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "jira")
    toolset.activate(list(toolset.full_tools()))
    assert toolset.tools[-1].description == "Load more tools by name. All tools are already loaded."


def _tools(*names: str) -> list[ToolDef]:
    return [ToolDef(name=n, description=f"{n.replace('_', ' ')} tool") for n in names]


TOOLS = _tools("alpha", "beta", "gamma", "delta", "epsilon")


async def test_llm_strategy_uses_the_selector_and_ignores_unknown_names() -> None:
    async def selector(query: str, tools: Sequence[ToolDef], k: int) -> list[str]:
        assert [t.name for t in tools] == ["alpha", "beta", "gamma", "delta"]
        return ["delta", "nope", "delta", "beta", "alpha"]

    result = await select_tools(
        "q",
        TOOLS,
        pinned=frozenset({"epsilon"}),
        threshold=2,
        max_tools=2,
        strategy=SelectionStrategy.LLM,
        selector=selector,
    )
    assert result is not None
    assert result.strategy is SelectionStrategy.LLM
    assert result.selected == ("delta", "beta")
    assert result.pinned == ("epsilon",)
    assert result.deferred == ("alpha", "gamma")
    assert result.fallback is None


async def _broken(query: str, tools: Sequence[ToolDef], k: int) -> list[str]:
    raise TimeoutError("model too slow")


async def _useless(query: str, tools: Sequence[ToolDef], k: int) -> list[str]:
    return ["nope"]


@pytest.mark.parametrize(
    ("selector", "reason"),
    [
        (_broken, "llm selection failed (TimeoutError)"),
        (_useless, "llm selection returned no known tool names"),
        (None, "no LLM selector configured"),
    ],
)
async def test_llm_failure_falls_back_to_lexical_never_to_all(
    selector: LlmSelector | None, reason: str
) -> None:
    result = await select_tools(
        "gamma",
        TOOLS,
        pinned=frozenset(),
        threshold=2,
        max_tools=2,
        strategy=SelectionStrategy.LLM,
        selector=selector,
    )
    assert result is not None
    assert result.strategy is SelectionStrategy.LEXICAL
    assert result.fallback == reason
    # Only what the request is about: the other tools score nothing (no filler up to max).
    assert result.selected == ("gamma",)
    assert len(result.deferred) == 4


async def test_selection_result_is_none_below_threshold() -> None:
    result = await select_tools(
        "q",
        TOOLS,
        pinned=frozenset(),
        threshold=5,
        max_tools=2,
        strategy=SelectionStrategy.LEXICAL,
    )
    assert result is None


async def test_pre_hydration_reaches_deferred_tools_without_loading_them(
    backends: Backends,
) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "search jira issues")
    assert "weather__forecast" not in [t.name for t in toolset.tools]
    result = await toolset.call("weather__forecast", {}, ctx(), active_only=False)
    assert result.ok
    assert "weather__forecast" not in [t.name for t in toolset.tools]


async def test_tools_outside_the_categories_are_unknown(backends: Backends) -> None:
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "")
    result = await toolset.call("http_fetch", {"url": "https://example.com"}, ctx())
    assert result.error is not None
    assert result.error.startswith("Unknown tool 'http_fetch'. Valid: ")
