"""Postgres over its Unix socket (`postgresql://user@/db?host=/var/run/postgresql`), the way a
gateway on the database's own host connects: a real `quiver serve` migrates, stores a chat's run
(the run-start pool), journals its events (the journal's own connection) and replays them, all
through the socket (docs/operations.md, "Postgres on the same host")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.fixtures.database import PG_ADMIN_DSN, create_database, drop_database
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM
from tests.fixtures.served import Served
from tests.fixtures.stores import admin, served_at


async def _socket_directory() -> str:
    """Where the test server listens on its Unix socket (asked over TCP)."""
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        setting = str(await conn.fetchval("SHOW unix_socket_directories"))
    finally:
        await conn.close()
    directories = [d.strip() for d in setting.split(",") if d.strip().startswith("/")]
    assert directories, f"the Postgres under test listens on no Unix socket ({setting!r})"
    return directories[0]


async def _socket_backends(database: str) -> set[str]:
    """How the database's client backends are connected: "socket" or "tcp"."""
    conn = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        rows = await conn.fetch(
            "SELECT client_addr FROM pg_stat_activity"
            " WHERE datname = $1 AND backend_type = 'client backend'",
            database,
        )
    finally:
        await conn.close()
    return {"socket" if row["client_addr"] is None else "tcp" for row in rows}


@pytest.fixture
async def on_socket(scripted_llm: ScriptedLLM, tmp_path: Path) -> AsyncIterator[tuple[Served, str]]:
    name = await create_database("quiver_socket")
    url = f"postgresql://postgres@/{name}?host={await _socket_directory()}"
    try:
        with served_at(url, tmp_path, QUIVER_LLM_BASE_URL=scripted_llm.base_url) as served:
            yield served, name
    finally:
        await drop_database(name)


@pytest.mark.timeout(180)
async def test_a_chat_is_stored_and_replayed_over_the_unix_socket(
    on_socket: tuple[Served, str],
) -> None:
    served, database = on_socket
    async with admin(served) as client:
        agent = (await client.post("/api/v1/agents", json={"name": "local"})).json()["id"]
        body = {"agent_id": agent, "message": "hello"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            assert resp.status_code == 200, await resp.aread()
            live = await read_sse(resp)
        assert (live[-1].event, live[-1].data.get("status")) == ("run_finished", "completed")
        run_id = live[0].data["run_id"]
        async with client.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
            assert resp.status_code == 200
            replayed = await read_sse(resp)
        backends = await _socket_backends(database)
    assert [(e.event, e.data) for e in replayed] == [(e.event, e.data) for e in live]
    assert backends == {"socket"}, backends  # no connection of the gateway's went over TCP
    conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:5432/{database}")
    try:
        stored = await conn.fetchval("SELECT count(*) FROM run_events WHERE run_id = $1", run_id)
    finally:
        await conn.close()
    assert stored == len(live)
