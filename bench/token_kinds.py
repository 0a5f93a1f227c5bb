"""Prompt-resident tokens per kind and mode on the reference catalog (bench.pipeline, scale 1).

For each kind (skills, connectors, databases, MCP servers) an agent holding only that kind's
rows is assembled in progressive mode and in legacy mode (skills: inline); the tokens of an
agent with no rows at all (instructions + built-in tools) are subtracted, so each number is
what that kind alone adds to every model call (system prompt + tool schemas, o200k_base).
Run: `.venv/bin/python -m bench.token_kinds`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.agents.models import Agent
from app.config import Settings, SkillMode, ToolMode
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import ResolvedModes
from app.pipeline.preview import count_prompt_tokens
from app.pipeline.sources.backends import Backends
from bench.common import print_table
from bench.pipeline import QUERY, _Unused, build_agent, github_tools, skill_content

KINDS = ("skills", "connectors", "databases", "mcp_servers")
_MODE_FIELD = {
    "skills": "skill",
    "connectors": "connector",
    "databases": "database",
    "mcp_servers": "mcp",
}


def _only(full: Agent, kind: str | None) -> Agent:
    rows: dict[str, Any] = {k: (getattr(full, k) if k == kind else []) for k in KINDS}
    return Agent(
        name=full.name,
        description=full.description,
        instructions=full.instructions,
        model_config_json={},
        tool_categories=None,
        **rows,
    )


async def _tokens(
    agent: Agent, settings: Settings, backends: Backends, modes: ResolvedModes | None
) -> int:
    toolset = await assemble_toolset(
        agent, settings, backends, QUERY, modes=modes, select=modes is None
    )
    return count_prompt_tokens(toolset.system_prompt, toolset.openai_tools()).total


async def _run() -> dict[str, Any]:
    settings = Settings()
    full = build_agent(1, github_tools(), [skill_content(i) for i in range(10)])
    out: dict[str, Any] = {}
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
        base = await _tokens(_only(full, None), settings, backends, None)
        for kind in KINDS:
            agent = _only(full, kind)
            legacy_mode: Any = SkillMode.INLINE if kind == "skills" else ToolMode.LEGACY
            legacy = ResolvedModes(**{_MODE_FIELD[kind]: legacy_mode})
            p = await _tokens(agent, settings, backends, None) - base
            lg = await _tokens(agent, settings, backends, legacy) - base
            out[kind] = {"progressive": p, "legacy": lg, "ratio_pct": 100.0 * p / lg}
        out["baseline"] = base
    return out


def run() -> dict[str, Any]:
    return asyncio.run(_run())


def main() -> None:
    r = run()
    rows = [
        [k, m["progressive"], m["legacy"], m["ratio_pct"]]
        for k, m in r.items()
        if isinstance(m, dict)
    ]
    print(f"baseline (instructions + built-ins): {r['baseline']} tokens")
    print_table(rows, ["kind", "progressive", "legacy", "ratio %"])


if __name__ == "__main__":
    main()
