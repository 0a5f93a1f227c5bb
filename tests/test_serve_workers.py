"""`quiver serve --workers N`: N processes on one port sharing PostgreSQL (live)."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.served import ADMIN_TOKEN, INITIALIZE, clean_env, quiver_serve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    name = await create_database("quiver_workers")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        await drop_database(name)


async def worker_rows(pg_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(pg_url)
    try:
        return list(await conn.fetch("SELECT id, pid FROM workers"))
    finally:
        await conn.close()


async def run_workers(pg_url: str) -> set[uuid.UUID]:
    conn = await asyncpg.connect(pg_url)
    try:
        return {r["worker_id"] for r in await conn.fetch("SELECT worker_id FROM runs")}
    finally:
        await conn.close()


@pytest.mark.timeout(300)
async def test_two_workers_start_and_both_serve_requests(pg_url: str, tmp_path: Path) -> None:
    env = clean_env(QUIVER_DATABASE_URL=pg_url, QUIVER_DATA_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "app.cli", "serve", "--workers", "2"]
    with quiver_serve(command, env=env, cwd=tmp_path, timeout_s=150) as served:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=served.base_url, headers=headers) as admin:
            agent = await admin.post("/api/v1/agents", json={"name": "two-workers"})
            assert agent.status_code == 201, agent.text
            workers = await worker_rows(pg_url)
            for _ in range(300):  # the second worker may still be starting
                if len(workers) == 2:
                    break
                await asyncio.sleep(0.2)
                workers = await worker_rows(pg_url)
            assert len({row["pid"] for row in workers}) == 2
            assert served.proc.pid not in {row["pid"] for row in workers}  # the parent serves none
        # Each MCP `initialize` opens a run stamped with the worker that served it; fresh
        # connections are spread over the processes by the kernel.
        seen: set[uuid.UUID] = set()
        for _ in range(60):
            async with httpx.AsyncClient(base_url=served.base_url, headers=headers) as fresh:
                opened = await fresh.post(
                    "/mcp/agents/two-workers",
                    json=INITIALIZE,
                    headers={"Accept": "application/json, text/event-stream"},
                )
                assert opened.status_code == 200, opened.text
            seen = await run_workers(pg_url)
            if len(seen) == 2:
                break
        assert seen == {row["id"] for row in workers}
    assert served.proc.returncode is not None  # SIGTERM stopped the parent and its workers
