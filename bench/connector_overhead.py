"""Connector execute overhead versus a direct httpx call to the same local server.

Both sides send the same GET (path parameter, query parameter, bearer token) to a uvicorn
server on 127.0.0.1 over a kept-alive connection. The connector side adds everything the
model's path pays for: schema validation, placement, auth injection, the egress check and
pinned connect, the breaker, the size-capped read, redaction, truncation and the audit
record (an in-memory sink, so the database is not measured). Samples alternate between
the two sides so drift hits both equally. Target: p50 ratio ≤ 1.3.

Run: `.venv/bin/python -m bench.connector_overhead`
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from app.config import Settings
from app.connectors.audit import AuditEntry
from app.connectors.execute import ConnectorExecutor
from app.connectors.models import Connector, ConnectorAction
from app.security.egress import new_http_client
from app.tools.base import CallContext
from bench.common import percentile, print_table
from tests.connectors.server_app import LocalServer

ITERATIONS = 400
WARMUP = 40
TOKEN = "bench-token-0123456789"


class _MemorySink:
    """Stands in for AuditSink's queue: `record` is all the call path pays for."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    def record(self, entry: AuditEntry) -> None:
        self.entries.append(entry)

    async def aclose(self) -> None:
        self.entries.clear()


def _rows(url: str) -> tuple[Connector, ConnectorAction]:
    connector = Connector(
        id=uuid.uuid4(),
        name="bench",
        description="",
        base_url=url,
        auth_type="bearer",
        auth_config={},
        credentials={"token": TOKEN},
        timeout_s=10.0,
    )
    action = ConnectorAction(
        id=uuid.uuid4(),
        name="get_item",
        description="",
        method="GET",
        path="/items/{id}",
        parameters={
            "type": "object",
            "required": ["id"],
            "properties": {
                "id": {"type": "string"},
                "q": {"type": "string"},
                "limit": {"type": "integer"},
            },
        },
        body_template=None,
        requires_confirmation=False,
    )
    return connector, action


async def _timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return (time.perf_counter() - started) * 1000


async def _measure(url: str) -> dict[str, list[float]]:
    settings = Settings(egress_allow_cidrs=["127.0.0.0/8"])
    connector, action = _rows(url)
    args = {"id": "item-42", "q": "blue shoes", "limit": 5}
    ctx = CallContext(run_id="bench")
    async with httpx.AsyncClient() as direct, new_http_client(settings) as shared:
        executor = ConnectorExecutor(http=shared, settings=settings, audit=_MemorySink())  # type: ignore[arg-type]

        async def call_direct() -> None:
            resp = await direct.get(
                f"{url}/items/item-42",
                params={"q": "blue shoes", "limit": 5},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            resp.raise_for_status()

        async def call_connector() -> None:
            result = await executor.execute(connector, action, args, ctx)
            if not result.ok:
                raise RuntimeError(result.error)

        for _ in range(WARMUP):
            await call_direct()
            await call_connector()
        samples: dict[str, list[float]] = {"direct": [], "connector": []}
        for i in range(ITERATIONS):
            order = [("direct", call_direct), ("connector", call_connector)]
            for name, fn in order if i % 2 else reversed(order):
                samples[name].append(await _timed(fn))
        await executor.aclose()
    return samples


def run() -> dict[str, Any]:
    """Measure and print; return the numbers for the harness."""
    server = LocalServer().start()
    try:
        samples = asyncio.run(_measure(server.url))
    finally:
        server.stop()
    direct, connector = samples["direct"], samples["connector"]
    numbers: dict[str, Any] = {
        "iterations": ITERATIONS,
        "direct_p50_ms": percentile(direct, 50),
        "direct_p95_ms": percentile(direct, 95),
        "connector_p50_ms": percentile(connector, 50),
        "connector_p95_ms": percentile(connector, 95),
    }
    numbers["ratio_p50"] = numbers["connector_p50_ms"] / numbers["direct_p50_ms"]
    numbers["overhead_p50_ms"] = numbers["connector_p50_ms"] - numbers["direct_p50_ms"]
    numbers["target_ratio"] = 1.3
    numbers["meets_target"] = numbers["ratio_p50"] <= 1.3
    print_table(
        [
            ["direct httpx", numbers["direct_p50_ms"], numbers["direct_p95_ms"]],
            ["connector execute", numbers["connector_p50_ms"], numbers["connector_p95_ms"]],
        ],
        headers=["path", "p50 ms", "p95 ms"],
    )
    print(
        f"ratio p50: {numbers['ratio_p50']:.3f} (target ≤ 1.3), "
        f"overhead p50: {numbers['overhead_p50_ms']:.3f} ms"
    )
    return numbers


if __name__ == "__main__":
    run()
