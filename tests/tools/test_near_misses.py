"""Unknown and near-miss names: the error lists the valid names and suggests the closest."""

from __future__ import annotations

from typing import Any

import pytest

from app.pipeline.assemble import assemble_toolset
from app.pipeline.sources.backends import Backends
from app.pipeline.toolset import AssembledToolset
from app.tools.suggest import did_you_mean, format_choices, unknown_name
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import Recorders, ctx, make_settings

JIRA_ACTIONS = "Valid: create_issue, get_issue, search_issues."
TABLES = "Valid: customers, orders."
GH_TOOLS = "Valid: search_issues, get_me."
TOOLS = "Valid: http_fetch, recall_knowledge, connector, database, mcp, read_skill."


def _discover(connector: str, action: str | None = None) -> dict[str, Any]:
    args = {"subcommand": "discover", "connector": connector}
    return args | ({"action": action} if action else {})


def _table(name: str) -> dict[str, Any]:
    return {"subcommand": "discover", "database": "sales", "table": name}


def _mcp(tool: str, subcommand: str = "discover") -> dict[str, Any]:
    return {"subcommand": subcommand, "server": "github", "tool": tool}


CASES: list[tuple[str, dict[str, Any], str]] = [
    # resource names: rejected by the enum in the schema, with a suggestion
    (
        "connector",
        _discover("jiraa"),
        "Invalid arguments for 'connector': connector: 'jiraa' is not one of"
        " ['jira', 'slack'] — did you mean 'jira'?",
    ),
    (
        "connector",
        _discover("JIRA"),
        "Invalid arguments for 'connector': connector: 'JIRA' is not one of"
        " ['jira', 'slack'] — did you mean 'jira'?",
    ),
    (
        "connector",
        _discover("github"),
        "Invalid arguments for 'connector': connector: 'github' is not one of ['jira', 'slack']",
    ),
    (
        "database",
        {"subcommand": "list_tables", "database": "sale"},
        "Invalid arguments for 'database': database: 'sale' is not one of ['sales']"
        " — did you mean 'sales'?",
    ),
    (
        "mcp",
        {"subcommand": "discover", "server": "git_hub"},
        "Invalid arguments for 'mcp': server: 'git_hub' is not one of ['github']"
        " — did you mean 'github'?",
    ),
    (
        "read_skill",
        {"name": "pdf-report"},
        "Invalid arguments for 'read_skill': name: 'pdf-report' is not one of"
        " ['pdf_report', 'triage'] — did you mean 'pdf_report'?",
    ),
    (
        "read_skill",
        {"name": "triag"},
        "Invalid arguments for 'read_skill': name: 'triag' is not one of"
        " ['pdf_report', 'triage'] — did you mean 'triage'?",
    ),
    (
        "read_skill",
        {"name": "deploy"},
        "Invalid arguments for 'read_skill': name: 'deploy' is not one of ['pdf_report', 'triage']",
    ),
    # subcommands
    (
        "connector",
        {"subcommand": "discovr", "connector": "jira"},
        "Invalid arguments for 'connector': subcommand: 'discovr' is not one of"
        " ['discover', 'execute', 'search'] — did you mean 'discover'?",
    ),
    (
        "connector",
        {"subcommand": "run", "connector": "jira"},
        "Invalid arguments for 'connector': subcommand: 'run' is not one of"
        " ['discover', 'execute', 'search']",
    ),
    (
        "database",
        {"subcommand": "list_table", "database": "sales"},
        "Invalid arguments for 'database': subcommand: 'list_table' is not one of"
        " ['list_tables', 'discover', 'query', 'search'] — did you mean 'list_tables'?",
    ),
    # leaf names: checked by the meta-tool against the row or cache
    (
        "connector",
        _discover("jira", "create_isue"),
        f"Unknown action 'create_isue' in connector 'jira'. {JIRA_ACTIONS}"
        " Did you mean 'create_issue'?",
    ),
    (
        "connector",
        _discover("jira", "issue_create"),
        f"Unknown action 'issue_create' in connector 'jira'. {JIRA_ACTIONS}"
        " Did you mean 'create_issue'?",
    ),
    (
        "connector",
        _discover("jira", "get-issue"),
        f"Unknown action 'get-issue' in connector 'jira'. {JIRA_ACTIONS} Did you mean 'get_issue'?",
    ),
    (
        "connector",
        {"subcommand": "execute", "connector": "jira", "action": "searchissues"},
        f"Unknown action 'searchissues' in connector 'jira'. {JIRA_ACTIONS}"
        " Did you mean 'search_issues'?",
    ),
    (
        "connector",
        _discover("jira", "delete_everything"),
        f"Unknown action 'delete_everything' in connector 'jira'. {JIRA_ACTIONS}",
    ),
    (
        "database",
        _table("order"),
        f"Unknown table 'order' in database 'sales'. {TABLES} Did you mean 'orders'?",
    ),
    (
        "database",
        _table("Customers"),
        f"Unknown table 'Customers' in database 'sales'. {TABLES} Did you mean 'customers'?",
    ),
    # a hidden table is neither listed nor suggested
    ("database", _table("salaries"), f"Unknown table 'salaries' in database 'sales'. {TABLES}"),
    ("database", _table("salary"), f"Unknown table 'salary' in database 'sales'. {TABLES}"),
    (
        "mcp",
        _mcp("search_issue"),
        f"Unknown tool 'search_issue' in MCP server 'github'. {GH_TOOLS}"
        " Did you mean 'search_issues'?",
    ),
    (
        "mcp",
        _mcp("getme", "call"),
        f"Unknown tool 'getme' in MCP server 'github'. {GH_TOOLS} Did you mean 'get_me'?",
    ),
    (
        "mcp",
        _mcp("list_repos", "call"),
        f"Unknown tool 'list_repos' in MCP server 'github'. {GH_TOOLS}",
    ),
    # tool names themselves
    ("conector", {}, f"Unknown tool 'conector'. {TOOLS} Did you mean 'connector'?"),
    ("read-skill", {}, f"Unknown tool 'read-skill'. {TOOLS} Did you mean 'read_skill'?"),
    ("sql", {}, f"Unknown tool 'sql'. {TOOLS}"),
]


@pytest.fixture
async def toolset(backends: Backends) -> AssembledToolset:
    return await assemble_toolset(full_agent(), make_settings(), backends, "")


@pytest.mark.parametrize(("tool", "args", "error"), CASES)
async def test_near_miss(
    toolset: AssembledToolset,
    rec: Recorders,
    tool: str,
    args: dict[str, Any],
    error: str,
) -> None:
    result = await toolset.call(tool, args, ctx())
    assert not result.ok
    assert result.error == error
    assert rec.connectors.calls == rec.mcp.calls == []


async def test_legacy_near_miss_points_at_request_tools(backends: Backends) -> None:
    agent = full_agent(
        config={
            "connector_tool_mode": "legacy",
            "mcp_tool_mode": "legacy",
            "tool_selection_threshold": 3,
            "tool_selection_max": 2,
        }
    )
    toolset = await assemble_toolset(agent, make_settings(), backends, "search github issues")
    result = await toolset.call("jira__get_isue", {}, ctx())
    assert result.error == (
        "Unknown tool 'jira__get_isue'. Valid: database, github__search_issues, github__get_me,"
        " read_skill, request_tools. Did you mean 'jira__get_issue'?"
        " It is not loaded yet: call request_tools first."
    )


@pytest.mark.parametrize(
    ("value", "choices", "expected"),
    [
        ("create_isue", ["create_issue", "close_issue"], ["create_issue"]),
        ("LIST_TABLES", ["list_tables"], ["list_tables"]),
        ("zzz", ["alpha", "beta"], []),
        ("", ["alpha"], []),
        ("alpha", [], []),
    ],
)
def test_did_you_mean(value: str, choices: list[str], expected: list[str]) -> None:
    assert did_you_mean(value, choices) == expected


def test_long_valid_lists_are_cut_at_twenty() -> None:
    names = [f"t{i:02d}" for i in range(25)]
    assert format_choices(names).endswith("t19 … and 5 more")
    assert unknown_name("table", "x", []) == "Unknown table 'x': none are available."
