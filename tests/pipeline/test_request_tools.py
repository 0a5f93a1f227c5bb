"""`request_tools` at scale: a capped, ranked listing, `query` search beside `tool_names`."""

from __future__ import annotations

import pytest

from app.agents.models import Agent
from app.pipeline.assemble import assemble_toolset
from app.pipeline.toolset import AssembledToolset
from app.tools.backends import Backends
from app.tools.base import ToolDef
from tests.fixtures.pipeline import ctx, make_action, make_agent, make_connector, make_settings

VERBS = ("create", "delete", "list", "update", "archive", "export")
NOUNS = (
    "invoice",
    "customer",
    "ticket",
    "shipment",
    "calendar_event",
    "playlist",
    "pull_request",
    "forecast",
    "payroll_run",
    "vaccine_record",
)
LEGACY = {"connector_tool_mode": "legacy", "tool_selection_threshold": 10, "tool_selection_max": 5}


def _agent(copies: int, config: dict[str, object] | None = None) -> Agent:
    """`copies` connectors of 60 actions each (6 verbs x 10 nouns)."""
    connectors = [
        make_connector(
            f"svc{c}",
            [
                make_action(
                    f"{verb}_{noun}",
                    description=f"{verb.capitalize()} a {noun.replace('_', ' ')} in service {c}.",
                )
                for verb in VERBS
                for noun in NOUNS
            ],
        )
        for c in range(copies)
    ]
    return make_agent(
        connectors=connectors, config={**LEGACY, **(config or {})}, tool_categories=["connector"]
    )


async def _assemble(
    backends: Backends, copies: int, query: str, **config: object
) -> AssembledToolset:
    return await assemble_toolset(_agent(copies, config), make_settings(), backends, query)


def _request_tools(toolset: AssembledToolset) -> ToolDef:
    tool = toolset.tools[-1]
    assert tool.name == "request_tools"
    return tool


async def test_listing_is_capped_and_does_not_grow_with_the_catalog(backends: Backends) -> None:
    small = _request_tools(await _assemble(backends, 1, "archive the playlist"))
    big = _request_tools(await _assemble(backends, 20, "archive the playlist"))
    for tool, deferred in ((small, 55), (big, 1195)):
        lines = tool.description.splitlines()
        assert lines[1] == f"{deferred} tools not loaded yet, the best for this request:"
        assert len([line for line in lines if line.startswith("- ")]) == 20
        assert lines[-1] == (
            f"… and {deferred - 20} more: call request_tools with a query to search them"
        )
    assert len(big.description) <= len(small.description) + 100
    assert len(big.description) < 3000


@pytest.mark.parametrize("strategy", ["lexical", "hybrid"])
async def test_listing_is_ranked_for_the_user_message(backends: Backends, strategy: str) -> None:
    toolset = await _assemble(
        backends,
        3,
        "export the payroll run",
        tool_selection_max=1,
        tool_selection_strategy=strategy,
    )
    assert toolset.selection is not None
    top = toolset.selection.selected[0]
    assert top.endswith("__export_payroll_run")
    listed = [
        line[2:].split(":")[0]
        for line in _request_tools(toolset).description.splitlines()
        if line.startswith("- ")
    ]
    # The other two services' copies of the best tool come first; no loaded tool is listed.
    assert set(listed[:2]) == {f"svc{c}__export_payroll_run" for c in range(3)} - {top}
    assert top not in listed


async def test_query_searches_deferred_tools_without_loading(backends: Backends) -> None:
    toolset = await _assemble(backends, 4, "create a ticket")
    before = [t.name for t in toolset.tools]
    result = await toolset.call("request_tools", {"query": "vaccine record delete"}, ctx())
    assert result.ok, result.error
    lines = result.output.splitlines()
    assert lines[0] == f"Best 10 of {240 - 5} tools not loaded yet for 'vaccine record delete':"
    hits = [line[2:].split(":")[0] for line in lines[1:-1]]
    assert len(hits) == 10
    assert set(hits[:4]) == {f"svc{c}__delete_vaccine_record" for c in range(4)}
    assert not set(hits) & set(before)
    assert lines[-1] == "Load them with request_tools(tool_names=[...])."
    assert result.loaded_tools == ()
    assert [t.name for t in toolset.tools] == before


async def test_query_and_tool_names_together_load_then_search(backends: Backends) -> None:
    toolset = await _assemble(backends, 2, "create a ticket")
    result = await toolset.call(
        "request_tools",
        {"tool_names": ["svc1__archive_invoice"], "query": "archive invoice"},
        ctx(),
    )
    assert result.ok
    assert result.loaded_tools == ("svc1__archive_invoice",)
    loaded, search = result.output.split("\n\n")
    assert loaded == "Loaded: svc1__archive_invoice"
    assert "svc0__archive_invoice" in search
    assert "- svc1__archive_invoice:" not in search
    assert "svc1__archive_invoice" in [t.name for t in toolset.tools]


async def test_neither_query_nor_tool_names_is_a_clear_error(backends: Backends) -> None:
    toolset = await _assemble(backends, 1, "create a ticket")
    result = await toolset.call("request_tools", {}, ctx())
    assert not result.ok
    assert result.error == (
        "Invalid arguments for 'request_tools': pass query (to search) or tool_names (to load)."
    )
    bad = await toolset.call("request_tools", {"query": "x", "extra": 1}, ctx())
    assert not bad.ok
    assert "extra" in (bad.error or "")
