"""MCP pool overhead: `McpPool.call` versus a direct SDK call on an open session.

For each transport (stdio child process, streamable HTTP on 127.0.0.1) it measures:
- p50 of N warm calls of a trivial tool, directly on an open `mcp.Client` and through the pool
  (the pool adds spec/fingerprint checks, the session lookup, a timeout scope and rendering);
- the first call with the pool cold (connect + handshake + call) versus warm (session reused,
  which is what the first call of every later run pays).

    .venv/bin/python -m bench.mcp_overhead
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client, StdioServerParameters

from app.config import Settings
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.tools.base import CallContext
from bench.common import print_table
from tests.mcp.servers import PYTHON, REPO, HttpMcpServer, stdio_row, url_row

CALLS = 400
WARMUP = 20
ARGS = {"a": 2, "b": 3}


async def _interleaved(
    direct: Callable[[], Awaitable[Any]], pooled: Callable[[], Awaitable[Any]], n: int
) -> tuple[list[float], list[float]]:
    """Alternate the two paths call by call so machine load hits both alike."""
    for _ in range(WARMUP):
        await direct()
        await pooled()
    samples: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = ((0, direct), (1, pooled)) if i % 2 == 0 else ((1, pooled), (0, direct))
        for index, fn in order:
            started = time.perf_counter()
            await fn()
            samples[index].append((time.perf_counter() - started) * 1000)
    return samples


def _direct_target(row: McpServer) -> StdioServerParameters | str:
    if row.transport == "stdio":
        return StdioServerParameters(
            command=PYTHON, args=list(row.args), env={"PYTHONPATH": str(REPO)}
        )
    assert row.url is not None
    return row.url


async def _measure(row: McpServer, settings: Settings) -> dict[str, float]:
    ctx = CallContext()
    pool = McpPool(settings)
    try:
        started = time.perf_counter()
        first = await pool.call(row, "add", ARGS, ctx)
        cold_ms = (time.perf_counter() - started) * 1000
        assert first.ok, first.error
        await asyncio.sleep(0.2)  # let the background tool-list refresh finish
        started = time.perf_counter()
        await pool.call(row, "add", ARGS, ctx)
        warm_ms = (time.perf_counter() - started) * 1000
        async with Client(_direct_target(row), mode="auto", cache=None) as client:
            direct, pooled = await _interleaved(
                lambda: client.call_tool("add", ARGS),
                lambda: pool.call(row, "add", ARGS, ctx),
                CALLS,
            )
        assert pool.connects == 1
    finally:
        await pool.aclose()
    p50_direct, p50_pool = statistics.median(direct), statistics.median(pooled)
    return {
        "p50_direct_ms": round(p50_direct, 3),
        "p50_pool_ms": round(p50_pool, 3),
        "ratio_p50": round(p50_pool / p50_direct, 3),
        "first_call_cold_ms": round(cold_ms, 1),
        "first_call_warm_ms": round(warm_ms, 3),
    }


async def _run() -> dict[str, Any]:
    settings = Settings(mcp_stdio_commands=[PYTHON], egress_allow_cidrs=["127.0.0.0/8"])
    results: dict[str, Any] = {"calls": CALLS}
    results["stdio"] = await _measure(stdio_row("bench_stdio"), settings)
    server = await HttpMcpServer("streamable_http").astart()
    try:
        results["streamable_http"] = await _measure(url_row(server, "bench_http"), settings)
    finally:
        await server.astop()
    return results


def run() -> dict[str, Any]:
    """Run the benchmark, print a table and return its numbers."""
    results = asyncio.run(_run())
    rows = [
        [
            name,
            results[name]["p50_direct_ms"],
            results[name]["p50_pool_ms"],
            results[name]["ratio_p50"],
            results[name]["first_call_cold_ms"],
            results[name]["first_call_warm_ms"],
        ]
        for name in ("stdio", "streamable_http")
    ]
    headers = ["transport", "direct p50 ms", "pool p50 ms", "ratio", "cold 1st ms", "warm 1st ms"]
    print_table(rows, headers)
    return results


if __name__ == "__main__":
    run()
