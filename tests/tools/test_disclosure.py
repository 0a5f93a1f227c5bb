"""Disclosure at scale: capped ranked stubs, `search` per kind, name enums only up to 50 names."""

from __future__ import annotations

from app.agents.models import Agent
from app.pipeline.assemble import assemble_toolset
from app.pipeline.preview import count_prompt_tokens
from app.pipeline.sources.backends import Backends
from app.pipeline.toolset import AssembledToolset
from tests.fixtures.pipeline import (
    column,
    ctx,
    make_action,
    make_agent,
    make_connector,
    make_database,
    make_server,
    make_settings,
    make_skill,
    mcp_tool,
    table,
)

TENANTS = [
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]
"""16 copies of the base catalog, told apart by a word in every source name."""
SERVICES = {
    "tracker": ("Issue tracker", ("issue", "project", "sprint", "comment")),
    "chat": ("Team messaging", ("message", "channel", "member", "reminder")),
    "billing": ("Payments and invoices", ("customer", "invoice", "charge", "refund")),
    "crm": ("Sales CRM", ("contact", "deal", "company", "note")),
    "desk": ("Support desk", ("ticket", "macro", "article", "agent")),
}
VERBS = ("list", "get", "create", "update", "delete")
TABLES = {
    "salesdb": "customers orders invoices payments refunds shipments carriers warehouses",
    "supportdb": "tickets comments agents teams queues slas macros surveys",
    "productdb": "events sessions features experiments releases builds incidents alerts",
}
REPO_TOOLS = (
    "search_code",
    "create_pull_request",
    "merge_pull_request",
    "list_commits",
    "create_branch",
    "get_file_contents",
    "add_issue_comment",
    "list_workflow_runs",
)


def scaled_agent(copies: int) -> Agent:
    """Per copy: 5 connectors x 20 actions, 3 databases x 8 tables, 1 MCP server, 10 skills."""
    connectors, databases, servers, skills = [], [], [], []
    for tenant in TENANTS[:copies]:
        for service, (label, nouns) in SERVICES.items():
            actions = [
                make_action(f"{verb}_{noun}", description=f"{verb.capitalize()} a {noun}.")
                for noun in nouns
                for verb in VERBS
            ]
            connectors.append(
                make_connector(f"{service}_{tenant}", actions, description=f"{label} ({tenant})")
            )
        for db, names in TABLES.items():
            tables = [
                table(t, [column("id", pk=True)], description=f"{t} of {tenant}")
                for t in names.split()
            ]
            databases.append(
                make_database(f"{db}_{tenant}", tables, description=f"Warehouse ({tenant})")
            )
        servers.append(
            make_server(
                f"repos_{tenant}",
                [mcp_tool(t, t.replace("_", " ").capitalize() + ".") for t in REPO_TOOLS],
                description=f"Code hosting ({tenant})",
            )
        )
        skills.extend(
            make_skill(f"sop_{topic}_{tenant}", f"How to handle {topic} requests for {tenant}.")
            for topic in (
                "refunds",
                "outages",
                "onboarding",
                "billing",
                "security",
                "access",
                "escalation",
                "releases",
                "privacy",
                "vendors",
            )
        )
    return make_agent(
        connectors=connectors,
        databases=databases,
        mcp_servers=servers,
        skills=skills,
        tool_categories=["connector", "database", "mcp", "skill"],
    )


async def _assemble(backends: Backends, copies: int, query: str) -> AssembledToolset:
    return await assemble_toolset(scaled_agent(copies), make_settings(), backends, query)


def _description(toolset: AssembledToolset, name: str) -> str:
    return toolset.full_tools()[name].description


async def test_small_kinds_list_every_source_with_enums(backends: Backends) -> None:
    toolset = await _assemble(backends, 1, "a refund please")
    lines = _description(toolset, "connector").splitlines()[2:]
    assert [line.split(":")[0] for line in lines] == [f"- {s}_alpha" for s in SERVICES]
    assert "more: use subcommand search" not in _description(toolset, "connector")
    connector = toolset.full_tools()["connector"].parameters["properties"]["connector"]
    assert connector["enum"] == [f"{s}_alpha" for s in SERVICES]
    # Names the message matches come first in a source's list, at most 5 of them.
    billing = next(line for line in lines if line.startswith("- billing_alpha"))
    assert billing == (
        "- billing_alpha: Payments and invoices (alpha). Actions (20): list_refund, get_refund,"
        " create_refund, update_refund, delete_refund … and 15 more"
    )
    assert "## Available Skills" in toolset.system_prompt
    assert "use read_skill with search" not in toolset.system_prompt


async def test_large_kinds_list_only_the_best_ranked_sources(backends: Backends) -> None:
    toolset = await _assemble(backends, 16, "the chat of kilo: list every channel")
    lines = _description(toolset, "connector").splitlines()
    assert lines[2].startswith("- chat_kilo: Team messaging (kilo). Actions (20): list_channel")
    assert len(lines) == 2 + 4 + 1
    assert lines[-1] == "… and 76 more: use subcommand search"
    assert _description(toolset, "database").splitlines()[-1] == (
        "… and 44 more: use subcommand search"
    )
    assert _description(toolset, "mcp").splitlines()[-1] == "… and 12 more: use subcommand search"
    skills = toolset.system_prompt.splitlines()
    assert len([line for line in skills if line.startswith("- sop_")]) == 10
    assert skills[-1] == "… and 150 more: use read_skill with search"
    # 80 connectors: no enum; 16 servers: still an enum.
    props = toolset.full_tools()["connector"].parameters["properties"]
    assert "enum" not in props["connector"]
    assert len(toolset.full_tools()["mcp"].parameters["properties"]["server"]["enum"]) == 16
    assert "enum" not in toolset.full_tools()["read_skill"].parameters["properties"]["name"]


async def test_prompt_stays_nearly_flat_as_the_catalog_grows(backends: Backends) -> None:
    totals = []
    for copies in (1, 16):
        toolset = await _assemble(backends, copies, "merge the pull request of papa")
        totals.append(count_prompt_tokens(toolset.system_prompt, toolset.openai_tools()).total)
    assert totals[1] <= 1.5 * totals[0]


async def test_names_beyond_the_enum_are_validated_with_a_near_miss(backends: Backends) -> None:
    toolset = await _assemble(backends, 16, "")
    args = {"subcommand": "discover", "connector": "billing_julliet"}
    result = await toolset.call("connector", args, ctx())
    assert not result.ok
    assert result.error is not None
    assert result.error.startswith("Unknown connector 'billing_julliet'. Valid: tracker_alpha,")
    assert result.error.endswith("Did you mean 'billing_juliet'?")
    missing = await toolset.call("connector", {"subcommand": "discover"}, ctx())
    assert missing.error == (
        "Invalid arguments for 'connector': 'connector' is required for subcommand 'discover'"
    )
    no_query = await toolset.call("mcp", {"subcommand": "search"}, ctx())
    assert no_query.error == (
        "Invalid arguments for 'mcp': 'query' is required for subcommand 'search'"
    )
    skill = await toolset.call("read_skill", {"name": "sop_refund_alpha"}, ctx())
    assert skill.error is not None
    assert skill.error.endswith("Did you mean 'sop_refunds_alpha'?")


async def test_search_returns_ten_one_line_matches(backends: Backends) -> None:
    toolset = await _assemble(backends, 16, "")
    result = await toolset.call(
        "database", {"subcommand": "search", "query": "incidents of oscar"}, ctx()
    )
    assert result.ok, result.error
    lines = result.output.splitlines()
    assert lines[0] == "Best 10 of 432 databases and tables for 'incidents of oscar':"
    assert lines[1] == "- productdb_oscar/incidents: incidents of oscar"
    assert len(lines) == 12
    assert lines[-1] == "Use discover with database=<name> and table=<name> for the columns."
    nothing = await toolset.call("mcp", {"subcommand": "search", "query": "zzzz qqqq"}, ctx())
    assert nothing.output == (
        "Nothing matches 'zzzz qqqq' among 144 servers and tools. Try other words."
    )


async def test_every_tool_of_a_16x_catalog_is_reachable_by_name(backends: Backends) -> None:
    """From the stubs, through search and discover, to every action, table, tool and skill."""
    agent = scaled_agent(16)
    toolset = await assemble_toolset(agent, make_settings(), backends, "hello")
    reached = 0

    async def walk(meta: str, source_key: str, item_key: str, source: str, item: str) -> None:
        nonlocal reached
        qualified = f"{source}/{item}"
        found = await toolset.call(meta, {"subcommand": "search", "query": qualified}, ctx())
        assert f"\n- {qualified}:" in found.output, (qualified, found.output)
        args = {"subcommand": "discover", source_key: source, item_key: item}
        shown = await toolset.call(meta, args, ctx())
        assert shown.ok, shown.error
        reached += 1

    for connector in agent.connectors:
        for action in connector.actions:
            await walk("connector", "connector", "action", connector.name, action.name)
    for database in agent.databases:
        for raw in database.schema_cache or []:
            await walk("database", "database", "table", database.name, raw["name"])
    for server in agent.mcp_servers:
        for raw in server.tools_cache or []:
            await walk("mcp", "server", "tool", server.name, raw["name"])
    for skill in agent.skills:
        found = await toolset.call("read_skill", {"search": skill.name}, ctx())
        assert f"\n- {skill.name}:" in found.output, (skill.name, found.output)
        assert (await toolset.call("read_skill", {"name": skill.name}, ctx())).ok
        reached += 1
    assert reached == 80 * 20 + 48 * 8 + 16 * 8 + 160
