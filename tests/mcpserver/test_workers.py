"""MCP sessions across `quiver serve` processes sharing one PostgreSQL database.

A client opens a session on worker 1, loads tools and calls one; worker 1 dies (SIGKILL) and the
same session (same `Mcp-Session-Id`) goes on on worker 2: the loaded tools are still listed,
calls work and land in the same run. Then worker 2 stops gracefully (SIGTERM hands its sessions
over) and a restarted worker 1 serves the session to its end. The client is the official `mcp`
client; the "load balancer" is an httpx hook that sends each request to the current worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.served import ADMIN_TOKEN, Served, clean_env, quiver_serve
from tests.mcp.servers import TIME_SERVER
from tests.mcpserver.test_endpoint import LEGACY, make_agent, text

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "app.cli", "serve"]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    name = await create_database("quiver_workers")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        await drop_database(name)


@pytest.fixture
def env(pg_url: str, tmp_path: Path) -> dict[str, str]:
    return clean_env(
        QUIVER_DATABASE_URL=pg_url,
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_MCP_STDIO_COMMANDS=TIME_SERVER,
        QUIVER_TOOL_TIMEOUT_S="30",
        # Dead workers are judged within seconds: a session must survive that sweep.
        QUIVER_WORKER_HEARTBEAT_S="0.5",
        QUIVER_WORKER_LOST_AFTER_S="2",
        PYTHONPATH=str(ROOT),
    )


@pytest.fixture
def shop_db(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
        conn.execute("INSERT INTO products (name, price) VALUES ('kettle', 29.5)")
    return path


class Balancer:
    """Routes every request of one httpx client to the worker currently chosen."""

    def __init__(self, served: Served) -> None:
        self.target = served

    async def route(self, request: httpx.Request) -> None:
        port = int(self.target.base_url.rsplit(":", 1)[1])
        request.url = request.url.copy_with(port=port)
        request.headers["Host"] = f"127.0.0.1:{port}"


async def journal(pg_url: str, run_id: str) -> list[tuple[int, str, str]]:
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT seq, kind, data::text AS data FROM run_events WHERE run_id = $1 ORDER BY seq",
            uuid.UUID(run_id),
        )
        return [(r["seq"], r["kind"], r["data"]) for r in rows]
    finally:
        await conn.close()


async def run_row(pg_url: str, run_id: str) -> dict[str, Any]:
    conn = await asyncpg.connect(pg_url)
    try:
        row = await conn.fetchrow(
            "SELECT status, kind, iterations, worker_id FROM runs WHERE id = $1",
            uuid.UUID(run_id),
        )
        assert row is not None
        return dict(row)
    finally:
        await conn.close()


@pytest.mark.timeout(420)
async def test_a_session_goes_on_on_another_worker_after_the_first_one_dies(
    env: dict[str, str], pg_url: str, tmp_path: Path, shop_db: Path
) -> None:
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120))
        two = stack.enter_context(quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120))
        admin_headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(
            base_url=two.base_url, headers=admin_headers, timeout=60
        ) as admin:
            config = LEGACY | {"tool_selection_threshold": 2, "tool_selection_max": 2}
            agent = await make_agent(admin, shop_db, config)
            preview = (await admin.get(f"/api/v1/agents/{agent['id']}/toolset")).json()
            wanted, later = preview["selection"]["deferred"][:2]

            balancer = Balancer(one)
            changed: list[str] = []

            async def on_message(message: Any) -> None:
                if isinstance(message, types.ToolListChangedNotification):
                    changed.append(message.method)

            http = httpx.AsyncClient(
                headers=admin_headers,
                timeout=httpx.Timeout(60, read=300),
                event_hooks={"request": [balancer.route]},
            )
            url = f"{one.base_url}/mcp/agents/{agent['name']}"
            async with (
                http,
                Client(
                    streamable_http_client(url, http_client=http), message_handler=on_message
                ) as client,
            ):
                first = {t.name for t in (await client.list_tools()).tools}
                assert not {wanted, later} & first
                loaded = await client.call_tool("request_tools", {"tool_names": [wanted]})
                assert not loaded.is_error, text(loaded)
                assert changed == ["notifications/tools/list_changed"]
                on_one = await client.call_tool(wanted, {})
                runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
                (run,) = runs["items"]
                assert (run["kind"], run["status"]) == ("mcp_session", "running")
                owner_one = (await run_row(pg_url, run["id"]))["worker_id"]

                # Worker 1 dies without a word; worker 2 judges it dead within seconds.
                one.proc.send_signal(signal.SIGKILL)
                one.proc.wait(timeout=30)
                balancer.target = two
                await asyncio.sleep(4)  # > QUIVER_WORKER_LOST_AFTER_S + a heartbeat
                assert (await run_row(pg_url, run["id"]))["status"] == "running"

                listed = {t.name for t in (await client.list_tools()).tools}
                assert listed == first | {wanted}  # what request_tools loaded on worker 1
                on_two = await client.call_tool(wanted, {})
                assert (on_two.is_error, text(on_two)) == (on_one.is_error, text(on_one))
                assert (await run_row(pg_url, run["id"]))["worker_id"] != owner_one
                more = await client.call_tool("request_tools", {"tool_names": [later]})
                assert not more.is_error, text(more)
                assert changed == ["notifications/tools/list_changed"] * 2

                # A graceful restart: worker 2 hands the session over, a new worker 1 serves it.
                restarted = stack.enter_context(
                    quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120)
                )
                two.proc.send_signal(signal.SIGTERM)
                two.proc.wait(timeout=30)
                balancer.target = restarted
                assert (await run_row(pg_url, run["id"]))["status"] == "running"
                again = {t.name for t in (await client.list_tools()).tools}
                assert again == first | {wanted, later}
                last = await client.call_tool(wanted, {})
                assert text(last) == text(on_one)
            # The client ended the session (DELETE, on the restarted worker).
            finished = await run_row(pg_url, run["id"])
        events = await journal(pg_url, run["id"])
    assert (finished["kind"], finished["status"]) == ("mcp_session", "completed")
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))  # no gap, no clash
    kinds = [kind for _, kind, _ in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    calls = kinds.count("tool_call")
    assert calls == kinds.count("tool_result") == finished["iterations"]
    assert calls == 5  # 2 on worker 1, 2 on worker 2, 1 on the restarted worker 1
    assert kinds.count("tools_loaded") == 2
    assert "run_failed" not in kinds
