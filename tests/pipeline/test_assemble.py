"""Each kind and mode: the exact tools and prompt text the model gets (small goldens)."""

from __future__ import annotations

from app.agents.config import ToolProfile
from app.config import SkillMode, ToolMode
from app.pipeline.assemble import (
    allowed_kinds,
    assemble_toolset,
    build_system_prompt,
    step_builtins,
    step_category_filter,
    step_profile,
)
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.kinds import step_connectors, step_databases, step_mcp, step_skills
from app.tools.names import NameAllocator
from tests.fixtures.catalog import full_agent, github, jira, sales, skills, slack
from tests.fixtures.pipeline import ctx, make_agent, make_settings

CONNECTOR_DESCRIPTION = """\
HTTP APIs. discover: action parameter schemas; execute: run an action with parameters;\
 search: find by query.
Connectors:
- jira: Jira Cloud issue tracker. Actions (3): create_issue, get_issue, search_issues
- slack: Actions (1): post_message"""

DATABASE_DESCRIPTION = """\
SQL databases. list_tables; discover: a table's columns; query: one read-only SELECT;\
 search: find by query.
Databases:
- sales: Sales data warehouse. Tables (2): customers, orders"""

MCP_DESCRIPTION = """\
MCP server tools. discover: input schemas; call: invoke a tool with parameters;\
 search: find by query.
Servers:
- github: GitHub MCP server. Tools (2): search_issues, get_me"""

SKILLS_PROMPT = """\
## Available Skills
- pdf_report: Turn a sales export into a branded PDF report with charts, a summary table and an\
 appendix of raw figur...
- triage: Triage a new bug."""

INLINE_PROMPT = """\
## Skills

### pdf_report
Turn a sales export into a branded PDF report with charts, a summary table and an appendix of raw\
 figures for the finance team.

1. Load the export.
2. Render.

### triage
Triage a new bug.

Label it, then assign it.

Script (python):
```python
print('triage')
```"""


def test_step_builtins_lists_http_fetch_and_recall(backends: Backends) -> None:
    assert list(step_builtins(backends).list_tools()) == ["http_fetch", "recall_knowledge"]


def test_allowed_kinds() -> None:
    assert allowed_kinds(None) == {
        "builtin",
        "knowledge",
        "connector",
        "database",
        "mcp",
        "agent",
        "skill",
    }
    assert allowed_kinds(["mcp", "skill", "bogus"]) == {"mcp", "skill"}
    assert allowed_kinds([]) == frozenset()


def test_category_filter_drops_builtins(backends: Backends) -> None:
    builtins = step_builtins(backends)
    assert list(step_category_filter(builtins, frozenset({"mcp"})).list_tools()) == []
    kept = step_category_filter(builtins, frozenset({"builtin"}))
    assert list(kept.list_tools()) == ["http_fetch", "recall_knowledge"]


def test_connectors_progressive(backends: Backends) -> None:
    part = step_connectors([jira(), slack()], ToolMode.PROGRESSIVE, backends, NameAllocator())
    assert part.toolset is not None
    tool = part.toolset.list_tools()["connector"]
    assert tool.description == CONNECTOR_DESCRIPTION
    assert tool.parameters["properties"]["connector"]["enum"] == ["jira", "slack"]
    assert tool.parameters["properties"]["subcommand"]["enum"] == ["discover", "execute", "search"]
    assert part.pinned == {"connector"}
    assert part.prompt == ""


def test_connectors_legacy(backends: Backends) -> None:
    part = step_connectors([jira(), slack()], ToolMode.LEGACY, backends, NameAllocator())
    assert part.toolset is not None
    tools = part.toolset.list_tools()
    assert list(tools) == [
        "jira__create_issue",
        "jira__get_issue",
        "jira__search_issues",
        "slack__post_message",
    ]
    create = tools["jira__create_issue"]
    assert create.description == "Create an issue in a project."
    # x-location is an executor detail: the model never sees it.
    assert create.parameters == {
        "type": "object",
        "properties": {"project": {"type": "string"}, "summary": {"type": "string"}},
        "required": ["project", "summary"],
    }
    assert create.target == "connector:jira/create_issue"
    assert part.pinned == frozenset()


def test_databases_progressive(backends: Backends) -> None:
    part = step_databases([sales()], ToolMode.PROGRESSIVE, backends, NameAllocator())
    assert part.toolset is not None
    tool = part.toolset.list_tools()["database"]
    assert tool.description == DATABASE_DESCRIPTION
    assert tool.parameters["properties"]["subcommand"]["enum"] == [
        "list_tables",
        "discover",
        "query",
        "search",
    ]


def test_databases_legacy(backends: Backends) -> None:
    part = step_databases([sales()], ToolMode.LEGACY, backends, NameAllocator())
    assert part.toolset is not None
    tools = part.toolset.list_tools()
    assert list(tools) == ["sales__list_tables", "sales__describe_table", "sales__query"]
    assert tools["sales__describe_table"].parameters["properties"]["table"]["enum"] == [
        "customers",
        "orders",
    ]
    assert tools["sales__query"].description == (
        "Run one read-only SQL query on database 'sales' (postgresql); at most 1000 rows."
    )


def test_mcp_progressive(backends: Backends) -> None:
    part = step_mcp([github()], ToolMode.PROGRESSIVE, backends, NameAllocator())
    assert part.toolset is not None
    assert part.toolset.list_tools()["mcp"].description == MCP_DESCRIPTION


def test_mcp_legacy(backends: Backends) -> None:
    part = step_mcp([github()], ToolMode.LEGACY, backends, NameAllocator())
    assert part.toolset is not None
    tools = part.toolset.list_tools()
    assert list(tools) == ["github__search_issues", "github__get_me"]
    assert tools["github__search_issues"].parameters["required"] == ["query"]


def test_skills_progressive() -> None:
    part = step_skills(skills(), SkillMode.PROGRESSIVE)
    assert part.prompt == SKILLS_PROMPT
    assert part.toolset is not None
    assert list(part.toolset.list_tools()) == ["read_skill"]
    stub = part.prompt.splitlines()[1]
    assert len(stub) == 120
    assert stub.endswith("...")


def test_skills_inline() -> None:
    part = step_skills(skills(), SkillMode.INLINE)
    assert part.toolset is None
    assert part.prompt == INLINE_PROMPT


def test_empty_kinds_produce_nothing(backends: Backends) -> None:
    names = NameAllocator()
    assert step_connectors([], ToolMode.PROGRESSIVE, backends, names).toolset is None
    assert step_databases([], ToolMode.LEGACY, backends, names).toolset is None
    assert step_mcp([], ToolMode.PROGRESSIVE, backends, names).toolset is None
    assert step_skills([], SkillMode.PROGRESSIVE).prompt == ""


async def test_profile_filters_and_refuses(backends: Backends) -> None:
    part = step_connectors([jira(), slack()], ToolMode.LEGACY, backends, NameAllocator())
    assert part.toolset is not None
    profile = ToolProfile(include=["jira__*"], exclude=["*create*"])
    filtered = step_profile(part.toolset, profile)
    assert list(filtered.list_tools()) == ["jira__get_issue", "jira__search_issues"]
    refused = await filtered.call_tool("jira__create_issue", {}, ctx())
    assert refused.error == (
        "Tool 'jira__create_issue' is not available to this agent (excluded by its tool profile)"
    )
    assert step_profile(part.toolset, None) is part.toolset


def test_system_prompt_joins_non_empty_sections() -> None:
    assert build_system_prompt("  Be brief. ", ["", "## A\n- x", "  "]) == "Be brief.\n\n## A\n- x"
    assert build_system_prompt("", []) == ""


async def test_full_agent_progressive(backends: Backends) -> None:
    toolset = await assemble_toolset(full_agent(), make_settings(), backends, "hello")
    assert [t.name for t in toolset.tools] == [
        "http_fetch",
        "recall_knowledge",
        "connector",
        "database",
        "mcp",
        "read_skill",
    ]
    assert toolset.system_prompt == f"You are the ops assistant.\n\n{SKILLS_PROMPT}"
    assert toolset.modes.as_dict() == {
        "skill": "progressive",
        "connector": "progressive",
        "database": "progressive",
        "mcp": "progressive",
    }
    assert toolset.selection is None
    assert toolset.openai_tools()[2]["function"]["description"] == CONNECTOR_DESCRIPTION


async def test_modes_mix_per_kind(backends: Backends) -> None:
    agent = full_agent(config={"mcp_tool_mode": "legacy", "skill_tool_mode": "inline"})
    toolset = await assemble_toolset(
        agent, make_settings(database_tool_mode="legacy"), backends, ""
    )
    assert [t.name for t in toolset.tools] == [
        "http_fetch",
        "recall_knowledge",
        "connector",
        "sales__list_tables",
        "sales__describe_table",
        "sales__query",
        "github__search_issues",
        "github__get_me",
    ]
    assert toolset.system_prompt == f"You are the ops assistant.\n\n{INLINE_PROMPT}"


async def test_tool_categories_limit_kinds(backends: Backends) -> None:
    agent = full_agent(tool_categories=["database", "skill"])
    toolset = await assemble_toolset(agent, make_settings(), backends, "")
    assert [t.name for t in toolset.tools] == ["database", "read_skill"]


async def test_legacy_names_are_unique_across_kinds(backends: Backends) -> None:
    from tests.fixtures.pipeline import make_action, make_connector, make_server, mcp_tool

    agent = make_agent(
        connectors=[make_connector("ops", [make_action("deploy.app")])],
        mcp_servers=[make_server("ops", [mcp_tool("deploy.app"), mcp_tool("deploy app")])],
        config={"connector_tool_mode": "legacy", "mcp_tool_mode": "legacy"},
        tool_categories=["connector", "mcp"],
    )
    toolset = await assemble_toolset(agent, make_settings(), backends, "")
    assert [t.name for t in toolset.tools] == [
        "ops__deploy_app",
        "ops__deploy_app_2",
        "ops__deploy_app_3",
    ]


async def test_profile_applies_to_the_assembled_set(backends: Backends) -> None:
    agent = full_agent(config={"tool_profile": {"exclude": ["http_*", "mcp"]}})
    toolset = await assemble_toolset(agent, make_settings(), backends, "")
    assert [t.name for t in toolset.tools] == [
        "recall_knowledge",
        "connector",
        "database",
        "read_skill",
    ]
    refused = await toolset.call("mcp", {"subcommand": "discover", "server": "github"}, ctx())
    assert (
        refused.error == "Tool 'mcp' is not available to this agent (excluded by its tool profile)"
    )
