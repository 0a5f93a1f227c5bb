"""Quiver as an MCP server (`/mcp/agents/{name}`): `tools/list` tokens and `tools/call` overhead.

Tokens: the reference catalog of `bench.pipeline` (scale 1: the GitHub MCP server's 117 tools,
5 connectors x 20 actions, 3 databases x 30 tables, 10 skills) as an MCP client receives it —
`tools/list` (name, description, inputSchema as JSON) plus the `initialize` instructions — served
progressively by Quiver versus the same upstream tools served flat (one tool per leaf, what an
aggregating gateway sends; skills inline in the instructions). o200k_base tokens.

Overhead: `quiver serve` in a subprocess (throwaway store) with an agent wired to
`mcp-server-time` over stdio (legacy mode, so the client calls `get_current_time` by name);
`CALLS` warm `tools/call` through Quiver's endpoint versus on a direct stdio session to
`mcp-server-time`, interleaved call by call. Each call through Quiver is also journaled
(`tool_call`, `tool_result`) and audited. Target: Quiver p50 ≤ 1.2x direct p50.

Run: `.venv/bin/python -m bench.mcp_endpoint`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.common import percentile, print_table
from bench.servers import gateway
from tests.mcp.servers import TIME_SERVER

CALLS = 200
WARMUP = 20
ARGS = {"timezone": "UTC"}


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
    from app.tools.backends import Backends
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
async def _quiver_session(base_url: str, token: str, agent: str) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(f"{base_url}/mcp/agents/{agent}", http_client=http)
        async with Client(transport, mode="legacy", cache=None) as client:
            yield client


async def _interleaved(
    direct: Callable[[], Awaitable[Any]], quiver: Callable[[], Awaitable[Any]], n: int
) -> tuple[list[float], list[float]]:
    for _ in range(WARMUP):
        await direct()
        await quiver()
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = ((0, direct), (1, quiver)) if i % 2 == 0 else ((1, quiver), (0, direct))
        for index, fn in order:
            started = time.perf_counter()
            await fn()
            samples[index].append((time.perf_counter() - started) * 1000)
    return samples


async def _overhead() -> dict[str, Any]:
    env = {"QUIVER_MCP_STDIO_COMMANDS": TIME_SERVER}
    async with gateway("http://127.0.0.1:9/v1", extra_env=env) as gw, gw.client() as admin:
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
        token = str(admin.headers["Authorization"]).removeprefix("Bearer ")
        direct_target = StdioServerParameters(command=TIME_SERVER, args=[])
        async with (
            _quiver_session(gw.base_url, token, "mcpbench") as quiver,
            Client(direct_target, mode="legacy", cache=None) as direct,
        ):
            names = [t.name for t in (await quiver.list_tools()).tools]
            (tool,) = [n for n in names if n.endswith("get_current_time")]

            async def via_quiver() -> None:
                result = await quiver.call_tool(tool, ARGS)
                if result.is_error:
                    raise RuntimeError(str(result.content))

            async def via_direct() -> None:
                await direct.call_tool("get_current_time", ARGS)

            direct_ms, quiver_ms = await _interleaved(via_direct, via_quiver, CALLS)
        store = gw.database
    d50, q50 = percentile(direct_ms, 50), percentile(quiver_ms, 50)
    return {
        "store": store,
        "calls": CALLS,
        "direct_p50_ms": d50,
        "direct_p99_ms": percentile(direct_ms, 99),
        "quiver_p50_ms": q50,
        "quiver_p99_ms": percentile(quiver_ms, 99),
        "added_p50_ms": q50 - d50,
        "ratio_p50": q50 / d50 if d50 else None,
    }


def run() -> dict[str, Any]:
    return {"tokens": asyncio.run(_tokens()), "call": asyncio.run(_overhead())}


def main() -> None:
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
    c = r["call"]
    print_table(
        [
            ["direct", c["direct_p50_ms"], c["direct_p99_ms"]],
            ["quiver", c["quiver_p50_ms"], c["quiver_p99_ms"]],
        ],
        ["tools/call get_current_time", "p50 ms", "p99 ms"],
    )
    print(f"added p50 {c['added_p50_ms']:.2f} ms, ratio {c['ratio_p50']:.2f}x ({c['store']})")
    print(json.dumps(r, indent=2))


if __name__ == "__main__":
    main()
