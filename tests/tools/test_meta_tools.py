"""The four meta-tools and request_tools through the assembled dispatcher."""

from __future__ import annotations

import pytest

from app.pipeline.assemble import assemble_toolset
from app.pipeline.sources.backends import Backends
from app.pipeline.toolset import AssembledToolset
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import Recorders, ctx, make_settings


@pytest.fixture
async def toolset(backends: Backends) -> AssembledToolset:
    return await assemble_toolset(full_agent(), make_settings(), backends, "")


async def test_read_skill_returns_content_and_script(toolset: AssembledToolset) -> None:
    result = await toolset.call("read_skill", {"name": "triage"}, ctx())
    assert result.ok
    assert result.output == (
        "# Skill: triage\n\nLabel it, then assign it.\n\n"
        "Script (python):\n```python\nprint('triage')\n```"
    )
    assert result.step == "skill:triage"


async def test_connector_discover_one_action(toolset: AssembledToolset) -> None:
    args = {"subcommand": "discover", "connector": "jira", "action": "create_issue"}
    result = await toolset.call("connector", args, ctx())
    assert result.output == (
        "jira/create_issue: POST /issue [requires confirmation]\n"
        "Create an issue in a project.\n"
        'parameters: {"type":"object","properties":{"project":{"type":"string"},'
        '"summary":{"type":"string"}},"required":["project","summary"]}'
    )


async def test_connector_discover_all_actions(toolset: AssembledToolset) -> None:
    result = await toolset.call("connector", {"subcommand": "discover", "connector": "jira"}, ctx())
    blocks = result.output.split("\n\n")
    assert [b.split(":", 1)[0] for b in blocks] == [
        "jira/create_issue",
        "jira/get_issue",
        "jira/search_issues",
    ]


async def test_connector_execute_dispatches_to_the_backend(
    toolset: AssembledToolset, rec: Recorders
) -> None:
    args = {
        "subcommand": "execute",
        "connector": "jira",
        "action": "search_issues",
        "parameters": {"jql": "project = OPS", "limit": 5},
    }
    result = await toolset.call("connector", args, ctx())
    assert result.ok
    assert result.output == "jira/search_issues ok"
    assert result.step == "connector:jira/search_issues"
    assert rec.connectors.calls == [("jira", "search_issues", {"jql": "project = OPS", "limit": 5})]


async def test_connector_execute_validates_parameters(
    toolset: AssembledToolset, rec: Recorders
) -> None:
    args = {
        "subcommand": "execute",
        "connector": "jira",
        "action": "search_issues",
        "parameters": {"jql": "x", "limit": "x"},
    }
    result = await toolset.call("connector", args, ctx())
    assert result.error == (
        "Invalid arguments for 'connector': parameters.limit: 'x' is not of type 'integer'"
    )
    assert rec.connectors.calls == []


async def test_connector_execute_needs_an_action(toolset: AssembledToolset) -> None:
    result = await toolset.call("connector", {"subcommand": "execute", "connector": "jira"}, ctx())
    assert result.error == (
        "Invalid arguments for 'connector': 'action' is required for subcommand 'execute'"
    )


async def test_meta_tool_arguments_are_validated_first(toolset: AssembledToolset) -> None:
    result = await toolset.call("connector", {"connector": "jira"}, ctx())
    assert result.error == "Invalid arguments for 'connector': 'subcommand' is a required property"


async def test_database_list_tables_hides_hidden_tables(toolset: AssembledToolset) -> None:
    result = await toolset.call(
        "database", {"subcommand": "list_tables", "database": "sales"}, ctx()
    )
    assert result.output == (
        "Database 'sales' (postgresql), 2 tables:\n"
        "- customers: People who buy. (2 columns)\n"
        "- orders (3 columns)"
    )


async def test_database_discover_table(toolset: AssembledToolset) -> None:
    args = {"subcommand": "discover", "database": "sales", "table": "orders"}
    result = await toolset.call("database", args, ctx())
    assert result.output == (
        "Table sales.orders\n"
        "- id integer primary key not null\n"
        "- customer_id integer not null: FK to customers.id\n"
        "- total numeric"
    )


async def test_database_discover_refuses_hidden_table(toolset: AssembledToolset) -> None:
    args = {"subcommand": "discover", "database": "sales", "table": "salaries"}
    result = await toolset.call("database", args, ctx())
    assert result.error == (
        "Unknown table 'salaries' in database 'sales'. Valid: customers, orders."
    )


async def test_database_query_dispatches(toolset: AssembledToolset, rec: Recorders) -> None:
    args = {"subcommand": "query", "database": "sales", "sql": "SELECT 1"}
    result = await toolset.call("database", args, ctx())
    assert result.ok
    assert result.step == "database:sales/query"
    assert rec.databases.calls == [("sales", "SELECT 1")]


async def test_database_query_needs_sql(toolset: AssembledToolset, rec: Recorders) -> None:
    result = await toolset.call("database", {"subcommand": "query", "database": "sales"}, ctx())
    assert result.error == "Invalid arguments for 'database': 'sql' is required for a query"
    assert rec.databases.calls == []


async def test_mcp_discover_gives_the_input_schema(toolset: AssembledToolset) -> None:
    args = {"subcommand": "discover", "server": "github", "tool": "search_issues"}
    result = await toolset.call("mcp", args, ctx())
    assert result.output == (
        "github/search_issues\nSearch issues and pull requests.\n"
        'input schema: {"type":"object","properties":{"query":{"type":"string"},'
        '"perPage":{"type":"integer"}},"required":["query"]}'
    )


async def test_mcp_call_validates_then_dispatches(
    toolset: AssembledToolset, rec: Recorders
) -> None:
    bad = {"subcommand": "call", "server": "github", "tool": "search_issues", "parameters": {}}
    result = await toolset.call("mcp", bad, ctx())
    assert result.error == "Invalid arguments for 'mcp': parameters: 'query' is a required property"
    good = {**bad, "parameters": {"query": "is:open"}}
    result = await toolset.call("mcp", good, ctx())
    assert result.output == "github/search_issues ok"
    assert result.step == "mcp:github/search_issues"
    assert rec.mcp.calls == [("github", "search_issues", {"query": "is:open"})]


async def test_backend_exception_becomes_a_failure(
    toolset: AssembledToolset, rec: Recorders
) -> None:
    rec.mcp.fail_with = RuntimeError("session broke")
    args = {"subcommand": "call", "server": "github", "tool": "get_me"}
    result = await toolset.call("mcp", args, ctx())
    assert not result.ok
    assert result.error == "Tool 'mcp' failed unexpectedly (RuntimeError): session broke"


async def test_legacy_tools_dispatch_with_validation(backends: Backends, rec: Recorders) -> None:
    agent = full_agent(
        config={
            "connector_tool_mode": "legacy",
            "database_tool_mode": "legacy",
            "mcp_tool_mode": "legacy",
        }
    )
    toolset = await assemble_toolset(agent, make_settings(), backends, "")
    bad = await toolset.call("jira__get_issue", {"key": 7}, ctx())
    assert bad.error == "Invalid arguments for 'jira__get_issue': key: 7 is not of type 'string'"
    ok = await toolset.call("jira__get_issue", {"key": "OPS-1"}, ctx())
    assert ok.step == "connector:jira/get_issue"
    described = await toolset.call("sales__describe_table", {"table": "customers"}, ctx())
    assert described.output.startswith("Table sales.customers: People who buy.\n- id integer")
    await toolset.call("sales__query", {"sql": "SELECT 2"}, ctx())
    await toolset.call("github__get_me", {}, ctx())
    assert rec.connectors.calls == [("jira", "get_issue", {"key": "OPS-1"})]
    assert rec.databases.calls == [("sales", "SELECT 2")]
    assert rec.mcp.calls == [("github", "get_me", {})]
