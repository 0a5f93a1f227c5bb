"""Quiver as an MCP server (`/mcp/agents/{name}`): `tools/list` tokens and `tools/call` overhead.

Tokens: the reference catalog of `bench.pipeline` (scale 1: the GitHub MCP server's 117 tools,
5 connectors x 20 actions, 3 databases x 30 tables, 10 skills) as an MCP client receives it —
`tools/list` (name, description, inputSchema as JSON) plus the `initialize` instructions — served
progressively by Quiver versus the same upstream tools served flat (one tool per leaf, what an
aggregating gateway sends; skills inline in the instructions). o200k_base tokens.

Overhead: `quiver serve` in a subprocess (throwaway store) with an agent wired to
`mcp-server-time` over stdio (legacy mode, so the client calls `get_current_time` by name);
`CALLS` warm calls of `get_current_time`, interleaved call by call (order rotated), through:
a direct stdio session to `mcp-server-time` (this process); the floors of `bench.mcp_floor`
(the same upstream behind a bare JSON route, and behind the bare MCP SDK streamable-HTTP
server); Quiver's admin route `POST /mcp-servers/{id}/call`; Quiver's endpoint `tools/call`
(each call journaled — `tool_call`, `tool_result` — and audited). Ratios are against the direct
p50 (the targets: admin ≤ 1.3x, endpoint ≤ 1.2x) and against each path's floor (what Quiver
adds over the same HTTP hop). CPU per call is the serving process's (this client's for direct).

Run: `.venv/bin/python -m bench.mcp_endpoint`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.common import percentile, print_table
from bench.mcp_floor import floor
from bench.servers import Gateway, gateway, raise_fd_limit
from tests.mcp.servers import TIME_SERVER

CALLS = 200
WARMUP = 20
CONCURRENCY = 50
SESSIONS = (50, 200)
ARGS = {"timezone": "UTC"}
FAILURES: list[str] = []
"""What went wrong in the sessions held open (the first few go into the results)."""
ADMIN_TARGET = 1.3
"""Admin route `POST /mcp-servers/{id}/call` p50 ≤ 1.3x a direct SDK call (1 concurrent)."""
ENDPOINT_TARGET = 1.2
"""Endpoint `tools/call` p50 ≤ 1.2x a direct SDK call."""
FLOORS = {"floor_http": "floor_http", "admin": "floor_http", "floor": "floor", "endpoint": "floor"}
"""Each HTTP path's floor (`bench.mcp_floor`): the same hop with no Quiver logic — a bare JSON
route for the admin route, the bare MCP SDK server for the endpoint."""


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


@contextlib.asynccontextmanager
async def _http_session(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", cache=None) as client:
            yield client


def _quiver_session(base_url: str, token: str, agent: str) -> Any:
    return _http_session(f"{base_url}/mcp/agents/{agent}", {"Authorization": f"Bearer {token}"})


def _cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one when `pid` is None), children excluded."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Call = Callable[[], Awaitable[Any]]


async def _interleaved(paths: dict[str, Call], n: int) -> dict[str, list[float]]:
    """Wall ms per call, the paths alternating call by call (order rotated) so load hits all."""
    names = list(paths)
    for _ in range(WARMUP):
        for name in names:
            await paths[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(n):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            await paths[name]()
            samples[name].append((time.perf_counter() - started) * 1000)
    return samples


async def _cpu_per_call(call: Call, n: int, pid: int | None) -> float:
    """CPU ms per call of the process doing the work, over a block of `n` sequential calls
    (a short pause after the block catches work done off the call path, e.g. journal batches)."""
    before = _cpu_s(pid)
    for _ in range(n):
        await call()
    await asyncio.sleep(0.3)
    return (_cpu_s(pid) - before) * 1000 / n


async def _throughput(call: Call, concurrency: int, per_worker: int) -> dict[str, float]:
    """Calls per second with `concurrency` callers each making `per_worker` calls; errors."""
    errors = 0

    async def worker() -> None:
        nonlocal errors
        for _ in range(per_worker):
            try:
                await call()
            except Exception as exc:
                errors += 1
                FAILURES.append(f"{type(exc).__name__}: {exc}"[:300])

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {
        "calls_per_s": concurrency * per_worker / (time.perf_counter() - started),
        "errors": errors,
    }


async def _setup(gw: Gateway, admin: httpx.AsyncClient) -> tuple[str, str]:
    """Register `mcp-server-time` and an agent using it in legacy mode; (server id, token)."""
    server = (
        await admin.post(
            "/api/v1/mcp-servers",
            json={"name": "clock", "transport": "stdio", "command": TIME_SERVER},
        )
    ).json()
    (await admin.post(f"/api/v1/mcp-servers/{server['id']}/refresh")).raise_for_status()
    agent = {
        "name": "mcpbench",
        "mcp_server_ids": [server["id"]],
        "model_config_json": {"mcp_tool_mode": "legacy"},
    }
    (await admin.post("/api/v1/agents", json=agent)).raise_for_status()
    return str(server["id"]), str(admin.headers["Authorization"]).removeprefix("Bearer ")


async def _overhead(profile_to: Path | None = None) -> dict[str, Any]:
    env = {"QUIVER_MCP_STDIO_COMMANDS": TIME_SERVER}
    async with (
        gateway("http://127.0.0.1:9/v1", extra_env=env, profile_to=profile_to) as gw,
        gw.client(connections=CONCURRENCY) as admin,
        floor(TIME_SERVER) as bare,
    ):
        server_id, token = await _setup(gw, admin)
        direct_target = StdioServerParameters(command=TIME_SERVER, args=[])
        async with (
            _quiver_session(gw.base_url, token, "mcpbench") as quiver,
            _http_session(bare.url, {}) as floor_client,
            Client(direct_target, mode="legacy", cache=None) as direct,
        ):
            names = [t.name for t in (await quiver.list_tools()).tools]
            (tool,) = [n for n in names if n.endswith("get_current_time")]

            async def via_direct() -> None:
                result = await direct.call_tool("get_current_time", ARGS)
                if result.is_error:
                    raise RuntimeError(str(result.content))

            async def via_floor() -> None:
                result = await floor_client.call_tool("get_current_time", ARGS)
                if result.is_error:
                    raise RuntimeError(str(result.content))

            async def via_floor_http() -> None:
                response = await admin.post(
                    bare.call_url, json={"tool": "get_current_time", "arguments": ARGS}
                )
                if response.status_code != 200 or not response.json()["ok"]:
                    raise RuntimeError(response.text)

            async def via_admin() -> None:
                response = await admin.post(
                    f"/api/v1/mcp-servers/{server_id}/call",
                    json={"tool": "get_current_time", "arguments": ARGS},
                )
                if response.status_code != 200 or not response.json()["ok"]:
                    raise RuntimeError(response.text)

            async def via_endpoint() -> None:
                result = await quiver.call_tool(tool, ARGS)
                if result.is_error:
                    raise RuntimeError(str(result.content))

            paths: dict[str, Call] = {
                "direct": via_direct,
                "floor": via_floor,
                "floor_http": via_floor_http,
                "admin": via_admin,
                "endpoint": via_endpoint,
            }
            wall = await _interleaved(paths, CALLS)
            pid = gw.proc.pid
            cpu = {
                "direct": await _cpu_per_call(via_direct, CALLS, None),
                "floor": await _cpu_per_call(via_floor, CALLS, bare.proc.pid),
                "floor_http": await _cpu_per_call(via_floor_http, CALLS, bare.proc.pid),
                "admin": await _cpu_per_call(via_admin, CALLS, pid),
                "endpoint": await _cpu_per_call(via_endpoint, CALLS, pid),
            }
            per_worker = max(1, CALLS // CONCURRENCY * 2)
            rate = {
                "direct": await _throughput(via_direct, CONCURRENCY, per_worker),
                "floor_http": await _throughput(via_floor_http, CONCURRENCY, per_worker),
                "admin": await _throughput(via_admin, CONCURRENCY, per_worker),
            }
        store = gw.database
    out: dict[str, Any] = {"store": store, "calls": CALLS, "concurrency": CONCURRENCY}
    d50 = percentile(wall["direct"], 50)
    for name in paths:
        p50 = percentile(wall[name], 50)
        out[name] = {
            "p50_ms": p50,
            "p99_ms": percentile(wall[name], 99),
            "cpu_ms_per_call": cpu[name],
            "ratio_p50": p50 / d50 if d50 else None,
            "floor": FLOORS.get(name),
            "ratio_p50_vs_floor": p50 / percentile(wall[FLOORS[name]], 50)
            if name in FLOORS
            else None,
            "cpu_ratio": cpu[name] / cpu["direct"] if cpu["direct"] else None,
        }
        if name in rate:
            out[name][f"calls_per_s_at_{CONCURRENCY}"] = rate[name]["calls_per_s"]
            out[name][f"errors_at_{CONCURRENCY}"] = rate[name]["errors"]
    out["first_errors"] = sorted(set(FAILURES))[:3]
    FAILURES.clear()
    out["targets"] = {"admin": ADMIN_TARGET, "endpoint": ENDPOINT_TARGET}
    # Kept for the summary table of earlier results.
    out["direct_p50_ms"], out["quiver_p50_ms"] = d50, out["endpoint"]["p50_ms"]
    out["ratio_p50"] = out["endpoint"]["ratio_p50"]
    return out


async def _hold(
    base_url: str, token: str, opened: asyncio.Queue[bool], call: asyncio.Event
) -> bool:
    """One session in its own task (its client must close in the task that opened it): open
    it, list the tools, report, wait for `call`, then call `get_current_time` once."""
    try:
        async with _quiver_session(base_url, token, "mcpbench") as client:
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
        _server_id, token = await _setup(gw, admin)
        async with _quiver_session(gw.base_url, token, "mcpbench") as warm:  # warm-up
            await warm.list_tools()
        for level in levels:
            await asyncio.sleep(1.0)
            before, cpu_before = gw.rss(), _cpu_s(gw.proc.pid)
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
            open_cpu_s = _cpu_s(gw.proc.pid) - cpu_before
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
        "call": asyncio.run(_overhead()),
        "sessions": asyncio.run(_sessions(SESSIONS)),
    }


def _print_calls(c: dict[str, Any]) -> None:
    targets = c["targets"]
    rows = []
    for name in ("direct", "floor_http", "admin", "floor", "endpoint"):
        m = c[name]
        target = targets.get(name)
        verdict = "" if target is None else ("pass" if m["ratio_p50"] <= target else "miss")
        rows.append(
            [
                name,
                m["p50_ms"],
                m["p99_ms"],
                m["cpu_ms_per_call"],
                m["ratio_p50"],
                "" if m["ratio_p50_vs_floor"] is None else m["ratio_p50_vs_floor"],
                m["cpu_ratio"],
                "" if target is None else f"<= {target}x {verdict}",
                m.get(f"calls_per_s_at_{c['concurrency']}", ""),
            ]
        )
    print_table(
        rows,
        [
            "get_current_time via",
            "p50 ms",
            "p99 ms",
            "CPU ms/call",
            "p50 ratio",
            "vs floor",
            "CPU ratio",
            "target",
            f"calls/s at {c['concurrency']}",
        ],
    )
    print(
        f"({c['store']} store; ratios against the direct p50 and the floor's; CPU: the server "
        "process (gateway or floor), or this client for direct)"
    )


def main() -> None:
    if sys.argv[1:2] == ["--calls"]:  # only the call overhead (optionally profiled)
        profile = Path(sys.argv[2]) if len(sys.argv) > 2 else None
        _print_calls(asyncio.run(_overhead(profile)))
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
    _print_calls(r["call"])
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
