"""A connector action's arguments are checked once, by the tool set, and the back-end gets
them marked checked (`CheckedArguments`); names the action's schema does not list are
refused in both modes."""

from __future__ import annotations

from typing import Any

from app.config import ToolMode
from app.pipeline.assemble import assemble_toolset
from app.pipeline.sources.backends import Backends
from app.tools.validation import CheckedArguments
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import Recorders, ctx, make_settings


def execute(parameters: dict[str, Any]) -> dict[str, Any]:
    """The connector meta-tool's arguments to run jira's `search_issues`."""
    return {
        "subcommand": "execute",
        "connector": "jira",
        "action": "search_issues",
        "parameters": parameters,
    }


UNKNOWN = "limt: unknown parameter (did you mean 'limit'?); valid: jql, limit"


async def test_meta_tool_hands_the_backend_checked_arguments(
    backends: Backends, rec: Recorders
) -> None:
    toolset = await assemble_toolset(full_agent(), make_settings(), backends, "")
    assert (await toolset.call("connector", execute({"jql": "x", "limit": 2}), ctx())).ok
    [(_, _, sent)] = rec.connectors.calls
    assert isinstance(sent, CheckedArguments)
    assert sent == {"jql": "x", "limit": 2}


async def test_meta_tool_refuses_a_name_the_action_does_not_list(
    backends: Backends, rec: Recorders
) -> None:
    toolset = await assemble_toolset(full_agent(), make_settings(), backends, "")
    result = await toolset.call("connector", execute({"jql": "x", "limt": 2}), ctx())
    assert result.error == f"Invalid arguments for 'connector': parameters.{UNKNOWN}"
    assert rec.connectors.calls == []


async def test_legacy_tool_checks_once_and_refuses_unknown_names(
    backends: Backends, rec: Recorders
) -> None:
    settings = make_settings(connector_tool_mode=ToolMode.LEGACY)
    toolset = await assemble_toolset(full_agent(), settings, backends, "")
    bad = await toolset.call("jira__search_issues", {"jql": "x", "limt": 2}, ctx())
    assert bad.error == f"Invalid arguments for 'jira__search_issues': {UNKNOWN}"
    assert rec.connectors.calls == []
    good = await toolset.call("jira__search_issues", {"jql": "x"}, ctx())
    assert good.ok
    [(_, _, sent)] = rec.connectors.calls
    assert isinstance(sent, CheckedArguments)
