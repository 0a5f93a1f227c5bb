"""Cancel latency of an in-flight tool call, per executor.

A cancelled run cancels its running tool calls (the task awaiting the executor). For each
kind of slow call — an MCP tool (streamable HTTP, both protocol eras), a long read query on
Postgres, MariaDB and SQLite, a connector request to a server that never answers — this
starts the call through the executor Quiver uses, waits until the far side has been working
on it for `RUNNING_S`, cancels the awaiting task and measures:

- `settled`: cancel → the executor's task has finished (what the run waits for, up to its
  grace period, before `run_finished {status: cancelled}`);
- `stopped`: cancel → the far side has observed it (the MCP handler was cancelled, the
  query is gone from `pg_stat_activity` / the process list, the SQLite file lock is released,
  the HTTP server saw the connection close).

Target: both p95 ≤ 1000 ms (a cancelled run ends within about a second).

    .venv/bin/python -m bench.cancel
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from app.config import Settings
from app.connectors.execute import ConnectorExecutor
from app.connectors.models import Connector, ConnectorAction
from app.databases.engines import EngineCache
from app.databases.query import DatabaseExecutor
from app.mcp.pool import McpPool
from app.security.egress import new_http_client
from app.tools.base import CallContext
from bench.common import percentile, print_table
from tests.databases import seed
from tests.databases.activity import SLOW_SQL, running
from tests.databases.conftest import make_connector
from tests.mcp.servers import HttpMcpServer, url_row

ROUNDS = 10
RUNNING_S = 0.5
"""How long each call runs before the cancel (a query's first ~0.3 s can be JIT compilation,
which Postgres does not interrupt)."""
TARGET_MS = 1000.0
CTX = CallContext(run_id="bench-cancel")
Check = Callable[[], Awaitable[bool]]


async def _until(check: Check, limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the far side never reached the expected state")
        await asyncio.sleep(0.005)


async def _one(
    start: Callable[[], Awaitable[Any]], busy: Check, idle: Check
) -> tuple[float, float]:
    task = asyncio.ensure_future(start())
    await _until(busy)
    await asyncio.sleep(RUNNING_S)
    cancelled_at = time.perf_counter()
    task.cancel()
    await asyncio.wait({task})
    settled = (time.perf_counter() - cancelled_at) * 1000
    await _until(idle)
    stopped = (time.perf_counter() - cancelled_at) * 1000
    return settled, stopped


async def _mcp(era: str) -> list[tuple[float, float]]:
    server = await HttpMcpServer("streamable_http", legacy=era == "legacy").astart()
    pool = McpPool(Settings(egress_allow_cidrs=["127.0.0.0/8"]))
    row = url_row(server)
    assert server.counting is not None
    counting = server.counting
    samples = []
    try:
        for _ in range(ROUNDS):
            calls, stopped = counting.methods["tools/call"], len(counting.cancelled)

            async def busy(calls: int = calls) -> bool:
                return counting.methods["tools/call"] > calls

            async def idle(stopped: int = stopped) -> bool:
                return len(counting.cancelled) > stopped

            samples.append(
                await _one(lambda: pool.call(row, "slow", {"seconds": 30}, CTX), busy, idle)
            )
    finally:
        await pool.aclose()
        await server.astop()
    return samples


async def _database(dialect: str) -> list[tuple[float, float]]:
    if dialect == "postgresql":
        db = await seed.create_postgres()
    elif dialect == "mysql":
        db = await seed.create_mysql()
    else:
        db = seed.create_sqlite(tempfile.mkdtemp(prefix="quiver-bench-cancel-"))

    async def busy() -> bool:
        return await running(db)

    async def idle() -> bool:
        return not await running(db)

    engines = EngineCache()
    executor = DatabaseExecutor(engines)
    connector = make_connector(db, query_timeout_s=120.0)
    samples = []
    try:
        for _ in range(ROUNDS):
            samples.append(
                await _one(lambda: executor.query(connector, SLOW_SQL[dialect], CTX), busy, idle)
            )
    finally:
        await engines.aclose()
        if dialect == "postgresql":
            await seed.drop_postgres(db)
        elif dialect == "mysql":
            await seed.drop_mysql(db)
    return samples


class _Stalling:
    """Reads a request, never answers, counts closed connections."""

    def __init__(self) -> None:
        self.requests = 0
        self.closed = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            while await reader.read(1024):
                pass
            self.closed += 1
        finally:
            writer.close()


async def _connector() -> list[tuple[float, float]]:
    stall = _Stalling()
    server = await asyncio.start_server(stall.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = Settings(egress_allow_cidrs=["127.0.0.0/8"])
    connector = Connector(
        id=uuid.uuid4(), name="stall", description="", base_url=f"http://127.0.0.1:{port}",
        auth_type="none", auth_config={}, credentials=None, timeout_s=120.0,
    )  # fmt: skip
    action = ConnectorAction(
        id=uuid.uuid4(), name="wait", description="", method="GET", path="/wait",
        parameters={"type": "object", "properties": {}}, body_template=None,
        requires_confirmation=False,
    )  # fmt: skip
    samples = []
    try:
        async with new_http_client(settings) as http:
            executor = ConnectorExecutor(http=http, settings=settings, audit=None)
            for _ in range(ROUNDS):
                sent, closed = stall.requests, stall.closed

                async def busy(sent: int = sent) -> bool:
                    return stall.requests > sent

                async def idle(closed: int = closed) -> bool:
                    return stall.closed > closed

                samples.append(
                    await _one(lambda: executor.execute(connector, action, {}, CTX), busy, idle)
                )
    finally:
        server.close()
    return samples


async def _measure() -> dict[str, list[tuple[float, float]]]:
    return {
        "mcp_legacy": await _mcp("legacy"),
        "mcp_modern": await _mcp("modern"),
        "postgresql": await _database("postgresql"),
        "mysql": await _database("mysql"),
        "sqlite": await _database("sqlite"),
        "connector": await _connector(),
    }


def run() -> dict[str, Any]:
    """Measure and print; return the numbers for the harness."""
    measured = asyncio.run(_measure())
    numbers: dict[str, Any] = {"rounds": ROUNDS, "target_ms": TARGET_MS}
    rows = []
    for kind, samples in measured.items():
        settled = [s for s, _ in samples]
        stopped = [s for _, s in samples]
        numbers[kind] = {
            "settled_p50_ms": percentile(settled, 50),
            "settled_p95_ms": percentile(settled, 95),
            "stopped_p50_ms": percentile(stopped, 50),
            "stopped_p95_ms": percentile(stopped, 95),
        }
        m = numbers[kind]
        rows.append([kind, m["settled_p50_ms"], m["settled_p95_ms"], m["stopped_p50_ms"],
                     m["stopped_p95_ms"]])  # fmt: skip
    numbers["meets_target"] = all(
        numbers[k]["stopped_p95_ms"] <= TARGET_MS and numbers[k]["settled_p95_ms"] <= TARGET_MS
        for k in measured
    )
    print_table(
        rows,
        headers=["call", "settled p50 ms", "settled p95 ms", "stopped p50 ms", "stopped p95 ms"],
    )
    return numbers


if __name__ == "__main__":
    run()
