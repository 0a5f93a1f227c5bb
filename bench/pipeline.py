"""Prompt-resident tokens and assembly latency of the tool pipeline on a reference catalog.

Catalog (scale 1): the GitHub MCP server's 117 real tool definitions as one server's
tools_cache, 5 connectors x 20 actions, 3 databases x 30 tables, 10 skills of ~2,000 tokens.
`scale` repeats every kind (4x = 4 MCP servers, 20 connectors, 12 databases, 40 skills).

Reported: system prompt + tool schema tokens (o200k_base) for progressive and for
all-legacy (skills inline, no runtime selection), and assembly time p50/p99 with warm
caches. Targets: progressive ≤ 2% of legacy at scale 1; p50 ≤ 2 ms, p99 ≤ 10 ms.
Run: `.venv/bin/python -m bench.pipeline`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import app.migrations.registry  # noqa: F401 - configure mappers before building rows
from app.agents.models import Agent
from app.config import Settings
from app.connectors.models import Connector, ConnectorAction
from app.databases.models import DatabaseConnector
from app.kit.tokens import count_tokens
from app.mcp.models import McpServer
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import ResolvedModes
from app.pipeline.preview import count_prompt_tokens
from app.pipeline.sources.backends import Backends
from app.skills.models import Skill
from app.tools.base import ToolResult
from bench.common import bench_data_dir, percentile, print_table

SCALES = (1, 4, 16)
WARMUP = 20
ROUNDS = 300
QUERY = "find open pull requests that mention the failing deploy and post a summary to slack"

_CONNECTORS = {
    "jira": ("Jira Cloud issue tracker", ["issue", "project", "sprint", "comment"]),
    "slack": ("Slack workspace messaging", ["message", "channel", "user", "reminder"]),
    "stripe": ("Stripe payments API", ["customer", "invoice", "charge", "refund"]),
    "hubspot": ("HubSpot CRM", ["contact", "deal", "company", "note"]),
    "zendesk": ("Zendesk support desk", ["ticket", "macro", "article", "agent"]),
}
_VERBS = {
    "list": (
        "GET",
        "List {noun}s visible to the caller, newest first. Supports free-text"
        " filtering, sorting and cursor paging.",
    ),
    "get": (
        "GET",
        "Get one {noun} by its id, including custom fields. Use expand to inline related records.",
    ),
    "create": (
        "POST",
        "Create a {noun} from the given fields and return it. Required fields"
        " depend on the account's configuration.",
    ),
    "update": (
        "PATCH",
        "Update fields of an existing {noun}; omitted fields keep their current values.",
    ),
    "delete": ("DELETE", "Delete a {noun} by id. This cannot be undone."),
}
_TABLES = {
    "sales": "customers orders order_items products prices discounts invoices payments refunds"
    " shipments carriers warehouses stock_levels suppliers purchase_orders regions territories"
    " sales_reps quotas leads opportunities accounts contacts campaigns channels currencies"
    " tax_rates returns subscriptions renewals",
    "support": "tickets ticket_events comments agents teams queues slas sla_breaches macros"
    " tags ticket_tags satisfaction_ratings articles article_views sections categories"
    " users organizations groups schedules holidays escalations automations triggers views"
    " attachments calls chats surveys",
    "product": "events sessions page_views features feature_flags experiments variants"
    " assignments releases builds deployments incidents alerts services endpoints errors"
    " traces metrics dashboards monitors users devices installs crashes feedback roadmap"
    " epics stories bugs sprints",
}
_SOP = (
    "Check the request against the runbook before acting, and write down every assumption. "
    "Collect the identifiers you need (ticket key, customer id, repository) from the message or "
    "by asking one precise question. Prefer read-only calls first; confirm the current state of "
    "the record, then make the smallest change that satisfies the request. After each change, "
    "read the record back and compare it with what you intended. If a call fails twice with the "
    "same error, stop, summarise what you tried and escalate to the on-call owner with links. "
)


def data_dir() -> Path:
    return bench_data_dir("catalogs/github-mcp-server")


def github_tools() -> list[dict[str, Any]]:
    path = data_dir() / "catalogs" / "github-mcp-server" / "tools.jsonl"
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [
        {"name": r["name"], "description": r["description"], "input_schema": r["input_schema"]}
        for r in rows
    ]


_STAMP = datetime(2026, 1, 1, tzinfo=UTC)


def _persisted() -> dict[str, Any]:
    """id and updated_at as a loaded row has them (the warm cache keys on both)."""
    return {"id": uuid.uuid4(), "updated_at": _STAMP}


def _action(verb: str, noun: str) -> ConnectorAction:
    """Shaped like an action imported from an OpenAPI document: described parameters."""
    method, text = _VERBS[verb]
    props: dict[str, Any] = {}
    if verb in ("get", "update", "delete"):
        props["id"] = {"type": "string", "description": f"The {noun} id."}
    if verb == "get":
        props["expand"] = {
            "type": "array",
            "items": {"type": "string"},
            "description": "Related records to inline.",
        }
    if verb == "list":
        props["query"] = {"type": "string", "description": "Free-text filter."}
        props["limit"] = {"type": "integer", "description": "Page size (1-100).", "default": 25}
        props["cursor"] = {"type": "string", "description": "Cursor from the previous page."}
        props["sort"] = {"type": "string", "enum": ["created", "updated", "name"]}
        props["order"] = {"type": "string", "enum": ["asc", "desc"], "default": "desc"}
    if verb in ("create", "update"):
        props["name"] = {"type": "string", "description": f"Display name of the {noun}."}
        props["description"] = {"type": "string", "description": "Long description (markdown)."}
        props["owner_id"] = {"type": "string", "description": "User who owns it."}
        props["labels"] = {"type": "array", "items": {"type": "string"}}
        props["fields"] = {"type": "object", "description": "Custom fields by API name."}
    path = f"/{noun}s" + ("/{id}" if "id" in props else "")
    return ConnectorAction(
        **_persisted(),
        name=f"{verb}_{noun}",
        description=text.format(noun=noun),
        method=method,
        path=path,
        parameters={
            "type": "object",
            "properties": props,
            "required": ["id"] if "id" in props else (["name"] if verb == "create" else []),
        },
        requires_confirmation=verb == "delete",
    )


def connectors(copy: int) -> list[Connector]:
    suffix = f"_{copy}" if copy else ""
    return [
        Connector(
            **_persisted(),
            name=f"{name}{suffix}",
            description=about,
            base_url=f"https://{name}.example.test",
            auth_type="bearer",
            auth_config={},
            actions=[_action(verb, noun) for noun in nouns for verb in _VERBS],
        )
        for name, (about, nouns) in _CONNECTORS.items()
    ]


def _columns(i: int) -> list[dict[str, Any]]:
    base = [("id", "bigint", False, True), ("created_at", "timestamptz", False, False)]
    extra = [(f"attr_{j}", "text", True, False) for j in range(3 + i % 4)]
    return [
        {"name": n, "type": t, "nullable": nl, "primary_key": pk, "description": ""}
        for n, t, nl, pk in [*base, *extra]
    ]


def databases(copy: int) -> list[DatabaseConnector]:
    return [
        DatabaseConnector(
            **_persisted(),
            name=f"{subject}_db{copy or ''}",
            description=f"{subject.title()} warehouse (read-only replica).",
            url="postgresql://db.example.test/x",
            dialect="postgresql",
            read_only=True,
            max_rows=1000,
            query_timeout_s=30.0,
            schema_cache=[
                {
                    "name": table,
                    "description": f"{table.replace('_', ' ').capitalize()} ({subject}).",
                    "hidden": False,
                    "columns": _columns(i),
                }
                for i, table in enumerate(tables.split())
            ],
        )
        for subject, tables in _TABLES.items()
    ]


def skill_content(i: int, target: int = 2000) -> str:
    """~`target` tokens of SOP text (counted per step, not re-counted as it grows)."""
    steps: list[str] = []
    total = 0
    while total < target:
        step = f"Step {len(steps) + 1} (procedure {i}). {_SOP}\n"
        steps.append(step)
        total += count_tokens(step)
    return "".join(steps)


def skills(copy: int, bodies: list[str]) -> list[Skill]:
    return [
        Skill(
            **_persisted(),
            name=f"sop_{i}{'_' + str(copy) if copy else ''}",
            description=f"Standard operating procedure {i}: how to handle a class of "
            "operational requests safely, from intake to verification and hand-off.",
            content=bodies[i],
        )
        for i in range(10)
    ]


def build_agent(scale: int, tools: list[dict[str, Any]], bodies: list[str]) -> Agent:
    return Agent(
        name="bench",
        description="",
        instructions="You are the operations assistant. Use tools; be precise and brief.",
        model_config_json={},
        tool_categories=None,
        connectors=[c for k in range(scale) for c in connectors(k)],
        databases=[d for k in range(scale) for d in databases(k)],
        mcp_servers=[
            McpServer(
                **_persisted(),
                name=f"github{k or ''}",
                description="GitHub MCP server.",
                transport="streamable_http",
                url="https://mcp.example.test",
                args=[],
                tools_cache=tools,
            )
            for k in range(scale)
        ],
        skills=[s for k in range(scale) for s in skills(k, bodies)],
    )


class _Unused:
    """Back-ends are never called while assembling."""

    async def execute(self, *args: Any) -> ToolResult:
        raise AssertionError("not called")

    async def query(self, *args: Any) -> ToolResult:
        raise AssertionError("not called")

    async def call(self, *args: Any) -> ToolResult:
        raise AssertionError("not called")

    async def recall(self, **kwargs: Any) -> ToolResult:
        raise AssertionError("not called")


async def _measure(
    agent: Agent,
    settings: Settings,
    backends: Backends,
    modes: ResolvedModes | None,
    rounds: int,
) -> dict[str, float]:
    """Wall and CPU time per assembly; CPU time is immune to other processes on the host."""
    select = modes is None
    for _ in range(WARMUP):
        await assemble_toolset(agent, settings, backends, QUERY, modes=modes, select=select)
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(rounds):
        start, start_cpu = time.perf_counter(), time.process_time()
        toolset = await assemble_toolset(
            agent, settings, backends, QUERY, modes=modes, select=select
        )
        toolset.openai_tools()
        cpu.append((time.process_time() - start_cpu) * 1000.0)
        wall.append((time.perf_counter() - start) * 1000.0)
    return {
        "p50_ms": percentile(wall, 50),
        "p99_ms": percentile(wall, 99),
        "cpu_p50_ms": percentile(cpu, 50),
        "cpu_p99_ms": percentile(cpu, 99),
    }


async def _run(scales: tuple[int, ...]) -> dict[str, Any]:
    settings = Settings()
    tools = github_tools()
    bodies = [skill_content(i) for i in range(10)]
    results: dict[str, Any] = {}
    async with httpx.AsyncClient() as http:
        unused = _Unused()
        backends = Backends(
            settings=settings,
            http=http,
            connectors=unused,
            databases=unused,
            mcp=unused,
            conventions=unused,
        )
        for scale in scales:
            agent = build_agent(scale, tools, bodies)
            progressive = await assemble_toolset(agent, settings, backends, QUERY)
            legacy = await assemble_toolset(
                agent, settings, backends, QUERY, modes=ResolvedModes.all_legacy(), select=False
            )
            p_tokens = count_prompt_tokens(progressive.system_prompt, progressive.openai_tools())
            l_tokens = count_prompt_tokens(legacy.system_prompt, legacy.openai_tools())
            row: dict[str, Any] = {
                "progressive_tokens": p_tokens.total,
                "progressive_prompt_tokens": p_tokens.system_prompt,
                "progressive_tool_tokens": p_tokens.tools,
                "legacy_tokens": l_tokens.total,
                "legacy_prompt_tokens": l_tokens.system_prompt,
                "legacy_tool_tokens": l_tokens.tools,
                "progressive_tools": len(progressive.tools),
                "legacy_tools": len(legacy.tools),
                "ratio_pct": 100.0 * p_tokens.total / l_tokens.total,
            }
            rounds = max(30, ROUNDS // scale)
            timing = await _measure(agent, settings, backends, None, ROUNDS)
            legacy_timing = await _measure(
                agent, settings, backends, ResolvedModes.all_legacy(), rounds
            )
            for key, value in timing.items():
                row[f"assembly_{key}"] = value
            for key, value in legacy_timing.items():
                row[f"legacy_assembly_{key}"] = value
            results[f"scale_{scale}"] = row
    base = results[f"scale_{scales[0]}"]
    for scale in scales:
        row = results[f"scale_{scale}"]
        row["progressive_growth"] = row["progressive_tokens"] / base["progressive_tokens"]
        row["legacy_growth"] = row["legacy_tokens"] / base["legacy_tokens"]
    return results


def run(scales: tuple[int, ...] = SCALES) -> dict[str, Any]:
    """Token and latency numbers per scale (keys `scale_1`, `scale_4`, ...)."""
    return asyncio.run(_run(scales))


def main() -> None:
    results = run()
    headers = [
        "scale",
        "prog tok",
        "legacy tok",
        "ratio %",
        "prog growth",
        "legacy growth",
        "tools p/l",
        "p50 ms",
        "p99 ms",
        "cpu p50",
        "cpu p99",
        "legacy p50",
        "legacy p99",
    ]
    rows = [
        [
            key.removeprefix("scale_") + "x",
            r["progressive_tokens"],
            r["legacy_tokens"],
            r["ratio_pct"],
            r["progressive_growth"],
            r["legacy_growth"],
            f"{r['progressive_tools']}/{r['legacy_tools']}",
            r["assembly_p50_ms"],
            r["assembly_p99_ms"],
            r["assembly_cpu_p50_ms"],
            r["assembly_cpu_p99_ms"],
            r["legacy_assembly_p50_ms"],
            r["legacy_assembly_p99_ms"],
        ]
        for key, r in results.items()
    ]
    print_table(rows, headers)


if __name__ == "__main__":
    main()
