"""Two gateway processes behind one PgBouncer in transaction mode (Debian's `pgbouncer`).

`QUIVER_DATABASE_URL` points at PgBouncer and `QUIVER_DATABASE_DIRECT_URL` at PostgreSQL:
migrations and LISTEN/NOTIFY go direct, everything else through the pooler with no statement
cache. Admin writes, concurrent chat runs, a run followed live from the other process, a
replay and the MCP endpoint all work, and PgBouncer's own statistics show the traffic.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.pgbouncer import Bouncer, pgbouncer
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN, INITIALIZE, clean_env, quiver_serve

ROOT = Path(__file__).resolve().parents[2]
REPLY = "every word of this answer travelled through the pooler and back again " * 2


@pytest.fixture
async def database() -> AsyncIterator[str]:
    name = await create_database("quiver_pgbouncer")
    try:
        yield name
    finally:
        await drop_database(name)


def pooled_transactions(bouncer: Bouncer, database: str) -> int:
    """Transactions PgBouncer passed for `database` (its admin console speaks only the simple
    query protocol: asked with psql)."""
    server = ["-h", "127.0.0.1", "-p", str(bouncer.port), "-U", "postgres", "-d", "pgbouncer"]
    done = subprocess.run(
        ["psql", *server, "-AtF", "|", "-c", "SHOW STATS"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert done.stdout, done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines()]
    return sum(int(row[1]) for row in rows if row[0] == database)


def events(text: str) -> list[str]:
    return [line.removeprefix("event: ") for line in text.splitlines() if line.startswith("event:")]


@pytest.mark.timeout(300)
async def test_two_processes_behind_pgbouncer_in_transaction_mode(
    database: str, tmp_path: Path
) -> None:
    llm = ScriptedLLM(token_delay_s=0.05, default_turn=Turn(text=REPLY))
    llm.start()
    try:
        with pgbouncer() as bouncer:
            env = clean_env(
                QUIVER_DATABASE_URL=bouncer.url(database),
                QUIVER_DATABASE_DIRECT_URL=f"postgresql://postgres@127.0.0.1:5432/{database}",
                QUIVER_DATA_DIR=str(tmp_path),
                QUIVER_LLM_BASE_URL=llm.base_url,
                PYTHONPATH=str(ROOT),
            )
            command = [sys.executable, "-m", "app.cli", "serve"]
            with (
                quiver_serve(command, env=env, cwd=tmp_path, timeout_s=90) as one,
                quiver_serve(command, env=env, cwd=tmp_path, timeout_s=90) as two,
            ):
                await _exercise(one.base_url, two.base_url)
            assert pooled_transactions(bouncer, database) > 50, bouncer.log
    finally:
        llm.stop()


async def _exercise(one: str, two: str) -> None:
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(headers=auth, timeout=60) as http:
        agent = await http.post(f"{one}/api/v1/agents", json={"name": "pooled"})
        assert agent.status_code == 201, agent.text
        agent_id = agent.json()["id"]
        renamed = await http.patch(
            f"{two}/api/v1/agents/{agent_id}", json={"instructions": "Answer briefly."}
        )
        assert renamed.status_code == 200, renamed.text

        async def chat(base: str) -> str:
            async with http.stream(
                "POST", f"{base}/api/v1/chat", json={"agent_id": agent_id, "message": "hi"}
            ) as response:
                assert response.status_code == 200, await response.aread()
                return "".join([chunk async for chunk in response.aiter_text()])

        # Concurrent runs on both processes: prepared statements would collide on the pooler.
        texts = await asyncio.gather(*(chat(base) for base in [one, two] * 6))
        for text in texts:
            assert events(text)[-1] == "run_finished", text[-300:]

        # A run live on process one, followed live from process two.
        async with http.stream(
            "POST", f"{one}/api/v1/chat", json={"agent_id": agent_id, "message": "hello"}
        ) as live:
            assert live.status_code == 200
            run_id = live.headers["x-run-id"]
            follow = asyncio.create_task(_follow(http, two, run_id))
            original = "".join([chunk async for chunk in live.aiter_text()])
        followed = await follow
        assert events(followed) == events(original)
        assert events(followed)[-1] == "run_finished"
        assert "".join(REPLY.split()) in "".join(_deltas(followed).split())

        replay = await http.get(f"{two}/api/v1/runs/{run_id}/events")
        assert events(replay.text) == events(original)

        # The MCP endpoint on the other process.
        mcp = await http.post(
            f"{two}/mcp/agents/pooled",
            json=INITIALIZE,
            headers={"accept": "application/json, text/event-stream"},
        )
        assert mcp.status_code == 200, mcp.text
        assert "serverInfo" in mcp.text


async def _follow(http: httpx.AsyncClient, base: str, run_id: str) -> str:
    async with http.stream("GET", f"{base}/api/v1/runs/{run_id}/events") as response:
        assert response.status_code == 200
        return "".join([chunk async for chunk in response.aiter_text()])


def _deltas(text: str) -> str:
    return "".join(
        json.loads(line.removeprefix("data: ")).get("text", "")
        for line in text.splitlines()
        if line.startswith("data: {") and '"text"' in line
    )
