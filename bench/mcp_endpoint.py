"""Quiver as an MCP server (`/mcp/agents/{name}`): `tools/list` tokens and `tools/call` overhead.

Tokens: the reference catalog of `bench.pipeline` (scale 1: the GitHub MCP server's 117 tools,
5 connectors x 20 actions, 3 databases x 30 tables, 10 skills) as an MCP client receives it —
`tools/list` (name, description, inputSchema as JSON) plus the `initialize` instructions — served
progressively by Quiver versus the same upstream tools served flat (one tool per leaf, what an
aggregating gateway sends; skills inline in the instructions). o200k_base tokens.

Calls: `bench.mcp_calls` — one `tools/call` side by side through Quiver's endpoint (Postgres and
SQLite, legacy and progressive), its admin route, the floors (a direct stdio session, a bare SDK
streamable-HTTP server, a bare JSON route) and the peers (FastMCP's proxy, mcp-proxy, LiteLLM's
MCP gateway), the path order shuffled every iteration.

Sessions: 50 and 200 endpoint sessions held open at once (RSS per session, CPU per session
opened, every session still answering).

Run: `.venv/bin/python -m bench.mcp_endpoint`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import httpx

from bench import mcp_calls
from bench.common import print_table
from bench.mcp_calls import cpu_s, quiver_session, setup_agent
from bench.servers import gateway, raise_fd_limit
from tests.mcp.servers import TIME_SERVER

ROUNDS = mcp_calls.ROUNDS
CALLS = mcp_calls.CALLS
"""`bench.mcp_calls`' rounds and calls per path (`--quick` lowers them)."""
SESSIONS = (50, 200)
ARGS = {"timezone": "UTC"}
FAILURES: list[str] = []
"""What went wrong in the sessions held open (the first few go into the results)."""


def _mcp_tools(openai_tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description"),
            "inputSchema": t["function"].get("parameters"),
        }
        for t in openai_tools
    ]


async def _tokens() -> dict[str, Any]:
    from app.config import Settings
    from app.kit.tokens import count_json_tokens, count_tokens
    from app.pipeline.assemble import assemble_toolset
    from app.pipeline.mode import ResolvedModes
    from app.pipeline.sources.backends import Backends
    from bench.pipeline import _Unused, build_agent, github_tools, skill_content

    settings = Settings()
    agent = build_agent(1, github_tools(), [skill_content(i) for i in range(10)])
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
        served = await assemble_toolset(agent, settings, backends, "")
        flat = await assemble_toolset(
            agent, settings, backends, "", modes=ResolvedModes.all_legacy(), select=False
        )
    out: dict[str, Any] = {}
    for key, toolset in (("progressive", served), ("flat", flat)):
        tools = _mcp_tools(toolset.openai_tools())
        list_tokens = count_json_tokens(tools)
        instructions = count_tokens(toolset.system_prompt)
        out[key] = {
            "tools": len(tools),
            "tools_list_tokens": list_tokens,
            "instructions_tokens": instructions,
            "total_tokens": list_tokens + instructions,
        }
    out["tools_list_saving_pct"] = 100.0 * (
        1 - out["progressive"]["tools_list_tokens"] / out["flat"]["tools_list_tokens"]
    )
    out["total_saving_pct"] = 100.0 * (
        1 - out["progressive"]["total_tokens"] / out["flat"]["total_tokens"]
    )
    return out


async def _hold(
    base_url: str, token: str, opened: asyncio.Queue[bool], call: asyncio.Event
) -> bool:
    """One session in its own task (its client must close in the task that opened it): open
    it, list the tools, report, wait for `call`, then call `get_current_time` once."""
    try:
        async with quiver_session(base_url, token, "mcpbench") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            opened.put_nowait(True)
            await call.wait()
            (tool,) = [n for n in names if n.endswith("get_current_time")]
            result = await client.call_tool(tool, ARGS)
            if result.is_error:
                FAILURES.append(str(result.content)[:300])
            return not result.is_error
    except Exception as exc:
        FAILURES.append(f"{type(exc).__name__}: {exc}"[:300])
        opened.put_nowait(False)
        return False


async def _sessions(levels: tuple[int, ...]) -> dict[str, Any]:
    """Open N endpoint sessions at once (initialize + tools/list each) and hold them: gateway
    RSS per open session; every session must still answer a `tools/call` at the end. One key
    holds them all: its open-session cap is raised above the largest level."""
    env = {
        "QUIVER_MCP_STDIO_COMMANDS": TIME_SERVER,
        "QUIVER_MCP_SESSIONS_PER_KEY": str(max(levels) + 10),
    }
    raise_fd_limit()
    out: dict[str, Any] = {}
    async with gateway("http://127.0.0.1:9/v1", extra_env=env) as gw, gw.client() as admin:
        _server_id, token = await setup_agent(admin)
        async with quiver_session(gw.base_url, token, "mcpbench") as warm:  # warm-up
            await warm.list_tools()
        for level in levels:
            await asyncio.sleep(1.0)
            before, cpu_before = gw.rss(), cpu_s(gw.proc.pid)
            opened: asyncio.Queue[bool] = asyncio.Queue()
            call = asyncio.Event()
            started = time.perf_counter()
            tasks: list[asyncio.Task[bool]] = []
            for _ in range(0, level, 25):  # opened in waves of 25
                wave = [
                    asyncio.create_task(_hold(gw.base_url, token, opened, call))
                    for _ in range(min(25, level - len(tasks)))
                ]
                tasks += wave
                for _ in wave:
                    await opened.get()
            opened_s = time.perf_counter() - started
            open_cpu_s = cpu_s(gw.proc.pid) - cpu_before
            await asyncio.sleep(1.0)
            held = gw.rss()
            call.set()
            answered = await asyncio.gather(*tasks)
            out[str(level)] = {
                "sessions": level,
                "open_s": opened_s,
                "open_cpu_ms_per_session": open_cpu_s * 1000 / level,
                "rss_before_mib": before / 2**20,
                "rss_held_mib": held / 2**20,
                "rss_per_session_kib": (held - before) / level / 1024,
                "call_errors": sum(1 for ok in answered if not ok),
                "first_errors": sorted(set(FAILURES))[:3],
            }
            FAILURES.clear()
        out["store"] = gw.database
    return out


def run() -> dict[str, Any]:
    return {
        "tokens": asyncio.run(_tokens()),
        "call": mcp_calls.run(rounds=ROUNDS, calls=CALLS),
        "sessions": asyncio.run(_sessions(SESSIONS)),
    }


def main() -> None:
    if sys.argv[1:2] == ["--calls"]:  # only the calls: `python -m bench.mcp_calls`
        sys.argv[1:2] = []
        mcp_calls.main()
        return
    r = run()
    t = r["tokens"]
    print_table(
        [
            [
                key,
                t[key]["tools"],
                t[key]["tools_list_tokens"],
                t[key]["instructions_tokens"],
                t[key]["total_tokens"],
            ]
            for key in ("progressive", "flat")
        ],
        ["served", "tools", "tools/list tokens", "instructions tokens", "total"],
    )
    print(
        f"tools/list saving {t['tools_list_saving_pct']:.1f}%, total {t['total_saving_pct']:.1f}%"
    )
    mcp_calls.print_results(r["call"])
    s = r["sessions"]
    print_table(
        [
            [
                m["sessions"],
                m["open_s"],
                m["open_cpu_ms_per_session"],
                m["rss_before_mib"],
                m["rss_held_mib"],
                m["rss_per_session_kib"],
                m["call_errors"],
            ]
            for key, m in s.items()
            if isinstance(m, dict)
        ],
        [
            "sessions held",
            "open s",
            "CPU ms/open",
            "RSS before MiB",
            "RSS held MiB",
            "KiB/session",
            "errors",
        ],
    )
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
