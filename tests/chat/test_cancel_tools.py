"""Cancelling a run stops the tool calls it has in flight, at the other end too.

A live Quiver (two app instances on one Postgres, to cover a cancel arriving at the other
worker) with the scripted LLM, whose script calls a slow tool: a real MCP server's `slow`
tool, a long read query on Postgres, MariaDB and SQLite, or a connector action against a
local HTTP server that never answers. The run is cancelled once the call is under way; it
must end `cancelled` promptly, the far side must have seen the cancellation, and the next
message in the conversation must work.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx
import pytest

from app.chat.tool_phase import CANCELLED_ERROR
from app.config import Settings
from app.connectors.execute import CANCELLED_AUDIT_ERROR
from app.main import create_app
from tests.chat.conftest import unique
from tests.conftest import ADMIN_TOKEN
from tests.databases import seed
from tests.databases.activity import SLOW_SQL, mysql_running, pg_running, sqlite_locked
from tests.databases.seed import SeededDb
from tests.fixtures.live import SseEvent, SseReader, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.mcp.servers import HttpMcpServer

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
CANCEL_BUDGET_S = 10.0
"""Cancel → `run_finished` must come long before the tool would have ended on its own (the
tools here run for 30 s or more, under 120 s timeouts). How fast a cancel lands (about a
second) is a speed target, measured per executor by `python -m bench.cancel`, not here: on
a loaded CI machine the run's final writes alone have taken over a second."""


@dataclass
class Gateway:
    a: httpx.AsyncClient
    b: httpx.AsyncClient
    """The same gateway's second worker (another app instance on the same database)."""


@pytest.fixture(scope="module")
async def urls(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> AsyncIterator[tuple[str, str]]:
    settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "tool_timeout_s": 120.0,
            "egress_allow_cidrs": ["127.0.0.0/8"],
        }
    )
    async with serve_app(create_app(settings)) as a, serve_app(create_app(settings)) as b:
        yield a, b


@pytest.fixture
async def gw(urls: tuple[str, str], scripted_llm: ScriptedLLM) -> AsyncIterator[Gateway]:
    async with (
        httpx.AsyncClient(base_url=urls[0], headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=urls[1], headers=AUTH, timeout=30) as b,
    ):
        yield Gateway(a, b)


async def created(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(path, json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


async def eventually(check: Callable[[], Awaitable[bool]], what: str, limit_s: float = 10) -> None:
    deadline = time.monotonic() + limit_s
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


@dataclass
class Cancelled:
    events: list[SseEvent]
    cancel_to_end_s: float
    conversation_id: str
    result: dict[str, Any] = field(default_factory=dict)


async def run_and_cancel(
    gw: Gateway,
    scripted_llm: ScriptedLLM,
    agent_id: str,
    call: tuple[str, dict[str, Any]],
    started: Callable[[], Awaitable[bool]],
    *,
    cancel_via: httpx.AsyncClient | None = None,
) -> Cancelled:
    """Start a run whose first turn makes `call`; cancel it once `started()` holds."""
    name, args = call
    scripted_llm.script(Turn(tool_calls=[("c1", name, args)]), Turn(text="not reached"))
    async with gw.a.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": "go slow"}
    ) as response:
        assert response.status_code == 200
        run_id = response.headers["x-run-id"]
        conversation_id = response.headers["x-conversation-id"]
        reader = SseReader(response)
        seen: list[SseEvent] = []
        while not any(e.event == "tool_call" for e in seen):
            seen += await reader.read(stop_after=1)
        await eventually(started, "the tool call to reach its server")
        cancelled_at = time.perf_counter()
        cancel = await (cancel_via or gw.a).post(f"/api/v1/runs/{run_id}/cancel")
        assert cancel.status_code == 200, cancel.text
        rest = await asyncio.wait_for(reader.read(), 30)
        ended_at = time.perf_counter()
    events = seen + rest
    results = [e.data for e in events if e.event == "tool_result"]
    return Cancelled(
        events=events,
        cancel_to_end_s=ended_at - cancelled_at,
        conversation_id=conversation_id,
        result=results[0] if results else {},
    )


async def assert_cancelled_and_usable(
    gw: Gateway, scripted_llm: ScriptedLLM, agent_id: str, outcome: Cancelled
) -> None:
    last = outcome.events[-1]
    assert last.event == "run_finished", [e.event for e in outcome.events]
    assert last.data["status"] == "cancelled"
    assert outcome.cancel_to_end_s < CANCEL_BUDGET_S, outcome.cancel_to_end_s
    assert outcome.result["call_id"] == "c1"
    assert outcome.result["ok"] is False
    assert outcome.result["error"] == CANCELLED_ERROR
    # The conversation goes on: the next message runs, and the model sees what happened.
    scripted_llm.reset()
    scripted_llm.script(Turn(text="still here"))
    async with gw.a.stream(
        "POST",
        "/api/v1/chat",
        json={
            "agent_id": agent_id,
            "message": "and now?",
            "conversation_id": outcome.conversation_id,
        },
    ) as response:
        assert response.status_code == 200, await response.aread()
        events = await asyncio.wait_for(SseReader(response).read(), 30)
    assert events[-1].event == "run_finished"
    assert events[-1].data["status"] == "completed"
    assert [e.data["content"] for e in events if e.event == "message"] == ["still here"]
    history = scripted_llm.requests[-1]["messages"]
    tool_messages = [m for m in history if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1"]
    assert CANCELLED_ERROR in tool_messages[0]["content"]


# --- MCP ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_servers() -> Iterator[dict[str, HttpMcpServer]]:
    # `legacy` negotiates the handshake-era protocol, where cancelling is a
    # `notifications/cancelled` frame; the 2026-era protocol closes the request's stream.
    servers = {
        "legacy": HttpMcpServer("streamable_http", legacy=True).start(),
        "modern": HttpMcpServer("streamable_http").start(),
    }
    yield servers
    for server in servers.values():
        server.stop()


async def mcp_agent(gw: Gateway, server: HttpMcpServer) -> tuple[str, str]:
    row = await created(
        gw.a,
        "/api/v1/mcp-servers",
        {"name": unique("mcp"), "transport": "streamable_http", "url": server.url},
    )
    refreshed = await gw.a.post(f"/api/v1/mcp-servers/{row['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    agent = await created(
        gw.a, "/api/v1/agents", {"name": unique("agent"), "mcp_server_ids": [row["id"]]}
    )
    return agent["id"], row["name"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_cancel_stops_a_running_mcp_tool(
    era: str, gw: Gateway, scripted_llm: ScriptedLLM, mcp_servers: dict[str, HttpMcpServer]
) -> None:
    server = mcp_servers[era]
    assert server.counting is not None
    counting = server.counting
    agent_id, name = await mcp_agent(gw, server)
    calls_before, cancelled_before = counting.methods["tools/call"], len(counting.cancelled)
    notified_before = counting.methods["notifications/cancelled"]

    async def started() -> bool:
        return counting.methods["tools/call"] > calls_before

    call = ("mcp", {"subcommand": "call", "server": name, "tool": "slow",
                    "parameters": {"seconds": 30}})  # fmt: skip
    outcome = await run_and_cancel(gw, scripted_llm, agent_id, call, started)

    # The server stops the tool's work (its handler is cancelled) while the run ends: the
    # run's end may reach the client a little before the server has acted on the cancel.
    async def stopped() -> bool:
        return len(counting.cancelled) > cancelled_before

    await eventually(stopped, "the server to cancel the tool's handler", limit_s=5)
    assert len(counting.cancelled) == cancelled_before + 1
    if era == "legacy":
        # ...because the client told it so.
        assert counting.methods["notifications/cancelled"] == notified_before + 1
    await assert_cancelled_and_usable(gw, scripted_llm, agent_id, outcome)


async def test_cancel_sent_to_another_worker_stops_a_running_tool(
    gw: Gateway, scripted_llm: ScriptedLLM, mcp_servers: dict[str, HttpMcpServer]
) -> None:
    server = mcp_servers["legacy"]
    assert server.counting is not None
    counting = server.counting
    agent_id, name = await mcp_agent(gw, server)
    calls_before, notified_before = (
        counting.methods["tools/call"],
        counting.methods["notifications/cancelled"],
    )

    async def started() -> bool:
        return counting.methods["tools/call"] > calls_before

    call = ("mcp", {"subcommand": "call", "server": name, "tool": "slow",
                    "parameters": {"seconds": 30}})  # fmt: skip
    # Worker B answers a request first, so its cold start is not counted as cancel latency.
    assert (await gw.b.get(f"/api/v1/agents/{agent_id}")).status_code == 200
    outcome = await run_and_cancel(gw, scripted_llm, agent_id, call, started, cancel_via=gw.b)

    # The notification goes out while the run ends: the end may reach the client a little first.
    async def notified() -> bool:
        return counting.methods["notifications/cancelled"] > notified_before

    await eventually(notified, "the server to be told the call was cancelled", limit_s=5)
    assert counting.methods["notifications/cancelled"] == notified_before + 1
    await assert_cancelled_and_usable(gw, scripted_llm, agent_id, outcome)


# --- databases ------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def pg_db() -> AsyncIterator[SeededDb]:
    db = await seed.create_postgres()
    yield db
    await seed.drop_postgres(db)


@pytest.fixture(scope="module")
async def mysql_db() -> AsyncIterator[SeededDb]:
    db = await seed.create_mysql()
    yield db
    await seed.drop_mysql(db)


@pytest.fixture(scope="module")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> SeededDb:
    return seed.create_sqlite(str(tmp_path_factory.mktemp("sqlite-cancel")))


async def database_agent(gw: Gateway, db: SeededDb) -> tuple[str, str]:
    row = await created(
        gw.a,
        "/api/v1/databases",
        {"name": unique("db"), "url": db.url, "query_timeout_s": 120},
    )
    agent = await created(
        gw.a, "/api/v1/agents", {"name": unique("agent"), "database_ids": [row["id"]]}
    )
    return agent["id"], row["name"]


def query_call(name: str, dialect: str) -> tuple[str, dict[str, Any]]:
    return "database", {"subcommand": "query", "database": name, "sql": SLOW_SQL[dialect]}


async def test_cancel_stops_a_running_postgres_query(
    gw: Gateway, scripted_llm: ScriptedLLM, pg_db: SeededDb
) -> None:
    agent_id, name = await database_agent(gw, pg_db)

    async def started() -> bool:
        return await pg_running(pg_db) == 1

    outcome = await run_and_cancel(
        gw, scripted_llm, agent_id, query_call(name, "postgresql"), started
    )

    # Cancelled on the server: the backend no longer runs the query.
    async def stopped() -> bool:
        return await pg_running(pg_db) == 0

    await eventually(stopped, "the query to stop", limit_s=5)
    await assert_cancelled_and_usable(gw, scripted_llm, agent_id, outcome)


async def test_cancel_stops_a_running_mariadb_query(
    gw: Gateway, scripted_llm: ScriptedLLM, mysql_db: SeededDb
) -> None:
    agent_id, name = await database_agent(gw, mysql_db)

    async def started() -> bool:
        return await mysql_running(mysql_db) == 1

    outcome = await run_and_cancel(gw, scripted_llm, agent_id, query_call(name, "mysql"), started)

    # Killed on the server: the query is gone from the process list.
    async def stopped() -> bool:
        return await mysql_running(mysql_db) == 0

    await eventually(stopped, "the query to stop", limit_s=5)
    await assert_cancelled_and_usable(gw, scripted_llm, agent_id, outcome)


async def test_cancel_stops_a_running_sqlite_query(
    gw: Gateway, scripted_llm: ScriptedLLM, sqlite_db: SeededDb
) -> None:
    agent_id, name = await database_agent(gw, sqlite_db)

    async def started() -> bool:
        return await asyncio.to_thread(sqlite_locked, sqlite_db)

    outcome = await run_and_cancel(gw, scripted_llm, agent_id, query_call(name, "sqlite"), started)
    # Interrupted: the statement no longer holds the database file.
    assert not await asyncio.to_thread(sqlite_locked, sqlite_db)
    await assert_cancelled_and_usable(gw, scripted_llm, agent_id, outcome)


# --- HTTP connectors ------------------------------------------------------------------


@dataclass
class StallingServer:
    """Accepts requests and never answers; records when each client closed its connection."""

    requests: int = 0
    closed: int = 0
    server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            while await reader.read(1024):  # until the client hangs up
                pass
            self.closed += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # a client that left before sending a whole request
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
def audit_dsn(committing_settings: Settings) -> str:
    return committing_settings.async_database_url.replace("postgresql+asyncpg://", "postgresql://")


@pytest.fixture
async def stalling() -> AsyncIterator[StallingServer]:
    stall = StallingServer()
    stall.server = await asyncio.start_server(stall.handle, "127.0.0.1", 0)
    yield stall
    stall.server.close()
    await stall.server.wait_closed()


async def test_cancel_aborts_a_running_http_request(
    gw: Gateway, scripted_llm: ScriptedLLM, stalling: StallingServer, audit_dsn: str
) -> None:
    connector = await created(
        gw.a,
        "/api/v1/connectors",
        {
            "name": unique("api"),
            "base_url": f"http://127.0.0.1:{stalling.port}",
            "timeout_s": 120,
            "actions": [{"name": "wait", "method": "GET", "path": "/wait",
                         "description": "Wait for a long time"}],
        },
    )  # fmt: skip
    agent = await created(
        gw.a, "/api/v1/agents", {"name": unique("agent"), "connector_ids": [connector["id"]]}
    )

    async def started() -> bool:
        return stalling.requests == 1

    call = ("connector", {"subcommand": "execute", "connector": connector["name"],
                          "action": "wait", "parameters": {}})  # fmt: skip
    outcome = await run_and_cancel(gw, scripted_llm, agent["id"], call, started)

    # The request was aborted: the server saw its connection closed.
    async def closed() -> bool:
        return stalling.closed == 1

    await eventually(closed, "the connection to close", limit_s=5)
    await assert_cancelled_and_usable(gw, scripted_llm, agent["id"], outcome)
    # The audit trail records the aborted call (rows are written off the call path).
    run_id = outcome.events[0].data["run_id"]
    rows: list[tuple[bool, str]] = []

    async def audited() -> bool:
        audit = await asyncpg.connect(audit_dsn)
        try:
            found = await audit.fetch(
                "SELECT ok, error FROM connector_calls WHERE run_id = $1", run_id
            )
        finally:
            await audit.close()
        rows[:] = [(r["ok"], r["error"]) for r in found]
        return bool(rows)

    await eventually(audited, "the audit row")
    assert rows == [(False, CANCELLED_AUDIT_ERROR)]
    # ... and so does the audit of every tool call (GET /tool-calls).
    calls: list[tuple[bool, str]] = []

    async def listed() -> bool:
        audit = await asyncpg.connect(audit_dsn)
        try:
            found = await audit.fetch(
                "SELECT ok, error FROM tool_calls WHERE run_id = $1", uuid.UUID(run_id)
            )
        finally:
            await audit.close()
        calls[:] = [(r["ok"], r["error"]) for r in found]
        return bool(calls)

    await eventually(listed, "the tool-call audit row")
    assert calls == [(False, CANCELLED_ERROR)]
