"""MCP session leases between two gateways on one PostgreSQL database, in one test process.

A worker that holds a session's lease serves it without reading who owns it; these tests
hold the lease to its word from both sides: a worker whose lease ran out (and whose session
another worker took) does not serve it any more, a worker that wants a session another one
holds waits for that lease to end, and two workers sent one session's calls at once never
both serve it (its journal has one unbroken sequence, each call's events together).
The "other worker" that never lets go is a row written by hand: a worker that stopped
answering (its process stalled or cut off) looks exactly like that to the database.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from app.chat.hub import CHANNEL, RELEASE_PREFIX
from app.chat.pgwrite import asyncpg_dsn
from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer
from tests.fixtures.live import serve_app
from tests.fixtures.served import INITIALIZE
from tests.mcpserver.test_edges import _slow_connector
from tests.mcpserver.test_endpoint import MCP_HEADERS, post, unique

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
LEASE_S = 1.0
"""The shortest lease there is: a held session is read again every half second."""


@pytest.fixture
def leased(committing_settings: Settings) -> Settings:
    return committing_settings.model_copy(update={"mcp_session_lease_s": LEASE_S})


@pytest.fixture
async def pg(leased: Settings) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(leased.async_database_url))
    try:
        yield conn
    finally:
        await conn.close()


class Session:
    """One MCP session spoken by hand: any request may go to any worker."""

    def __init__(self, http: httpx.AsyncClient, agent: str, skill: str) -> None:
        self.http, self.agent, self.skill = http, agent, skill
        self.headers: dict[str, str] = {}
        self.run_id = uuid.UUID(int=0)
        self._ids = iter(range(2, 1_000_000))

    async def open(self, url: str) -> None:
        opened = await self.http.post(
            f"{url}/mcp/agents/{self.agent}", json=INITIALIZE, headers=MCP_HEADERS
        )
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        self.run_id = uuid.UUID(hex=session_id[:32])
        self.headers = MCP_HEADERS | {
            "Mcp-Session-Id": session_id,
            "Mcp-Protocol-Version": "2025-06-18",
        }
        ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await self.http.post(
            f"{url}/mcp/agents/{self.agent}", json=ready, headers=self.headers
        )
        assert sent.status_code == 202, sent.text

    async def call(self, url: str, params: dict[str, Any] | None = None) -> httpx.Response:
        read = {"name": "read_skill", "arguments": {"name": self.skill}}
        body = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "tools/call",
            "params": params or read,
        }
        return await self.http.post(
            f"{url}/mcp/agents/{self.agent}", json=body, headers=self.headers
        )


def result_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a call, answered as JSON or as an SSE stream (a slow call)."""
    body = response.text
    if not body.lstrip().startswith("{"):
        datas = [line[5:] for line in body.splitlines() if line.startswith("data:")]
        body = next(d for d in reversed(datas) if '"result"' in d)
    result: dict[str, Any] = json.loads(body)["result"]
    return result


def answered(response: httpx.Response) -> bool:
    """A 200 whose JSON-RPC result is the skill's text (the call was served)."""
    if response.status_code != 200:
        return False
    result = result_of(response)
    return not result.get("isError") and "Steep." in result["content"][0]["text"]


async def new_session(http: httpx.AsyncClient, url: str) -> Session:
    skill = await post_to(
        http, url, "skills", {"name": unique("brew"), "description": "d", "content": "Steep."}
    )
    agent = await post_to(
        http, url, "agents", {"name": unique("leased"), "skill_ids": [skill["id"]]}
    )
    session = Session(http, agent["name"], skill["name"])
    await session.open(url)
    return session


async def post_to(
    http: httpx.AsyncClient, url: str, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as admin:
        return await post(admin, path, body)


async def lease_of(pg: asyncpg.Connection, run_id: uuid.UUID) -> asyncpg.Record:
    row = await pg.fetchrow(
        "SELECT worker_id, lease_until, lease_until > now() AS valid FROM runs WHERE id = $1",
        run_id,
    )
    assert row is not None
    return row


async def test_a_worker_does_not_serve_a_session_past_its_lease(
    leased: Settings, pg: asyncpg.Connection
) -> None:
    async with (
        serve_app(create_app(leased)) as one,
        httpx.AsyncClient(headers=AUTH, timeout=30) as http,
    ):
        session = await new_session(http, one)
        assert answered(await session.call(one))  # worker 1 takes the lease
        held = await lease_of(pg, session.run_id)
        assert held["valid"]
        assert held["worker_id"] is not None
        await asyncio.sleep(LEASE_S + 0.3)
        # The lease ran out by the database's clock; a worker that stopped answering takes
        # the session (and will never let go of it).
        stalled = uuid.uuid4()
        taken = await pg.execute(
            "UPDATE runs SET worker_id = $2, lease_until = now() + interval '1 minute'"
            " WHERE id = $1 AND lease_until <= now()",
            session.run_id,
            stalled,
        )
        assert taken == "UPDATE 1"
        asks: list[str] = []

        def heard(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            if payload.startswith(RELEASE_PREFIX):
                asks.append(payload)

        await pg.add_listener(CHANNEL, heard)
        started = time.monotonic()
        refused = await session.call(one)
        waited = time.monotonic() - started
        await pg.execute("SELECT 1")  # the notifications sent before are delivered
        await pg.remove_listener(CHANNEL, heard)
        # The holder was asked once, by name, though the waiter read the run four times.
        assert asks == [f"{RELEASE_PREFIX}{session.run_id}:{stalled}"]
        # Worker 1 read the run again, asked for the session, waited a lease and gave up.
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert waited >= LEASE_S
        assert (await lease_of(pg, session.run_id))["worker_id"] == stalled
        # Once that lease is over (here: released), worker 1 takes the session back.
        await pg.execute("UPDATE runs SET lease_until = NULL WHERE id = $1", session.run_id)
        assert answered(await session.call(one))
        assert (await lease_of(pg, session.run_id))["worker_id"] != stalled


async def test_a_worker_takes_a_session_only_once_the_lease_on_it_has_run_out(
    leased: Settings, pg: asyncpg.Connection
) -> None:
    async with (
        serve_app(create_app(leased)) as one,
        serve_app(create_app(leased)) as two,
        httpx.AsyncClient(headers=AUTH, timeout=30) as http,
    ):
        session = await new_session(http, one)
        assert answered(await session.call(one))
        await asyncio.sleep(LEASE_S + 0.3)  # worker 1's lease ran out
        # A worker that stopped answering took the session; its lease has 0.8 s to go.
        stalled = uuid.uuid4()
        await pg.execute(
            "UPDATE runs SET worker_id = $2, lease_until = now() + interval '0.8 seconds'"
            " WHERE id = $1 AND lease_until <= now()",
            session.run_id,
            stalled,
        )
        for url in (two, one):  # a worker that never held it, and the one that did
            started = time.monotonic()
            served = await session.call(url)
            waited = time.monotonic() - started
            assert answered(served), served.text
            assert waited >= 0.7, f"served {waited:.2f} s into a lease of 0.8 s"
            after = await lease_of(pg, session.run_id)
            assert after["valid"]
            assert after["worker_id"] != stalled
            await asyncio.sleep(LEASE_S + 0.3)
            await pg.execute(
                "UPDATE runs SET worker_id = $2, lease_until = now() + interval '0.8 seconds'"
                " WHERE id = $1 AND lease_until <= now()",
                session.run_id,
                stalled,
            )


@pytest.fixture(scope="module")
def upstream() -> Iterator[LocalServer]:
    server = LocalServer().start()
    yield server
    server.stop()


async def test_two_workers_sent_one_session_at_once_never_both_serve_it(
    leased: Settings, pg: asyncpg.Connection, upstream: LocalServer
) -> None:
    settings = leased.model_copy(
        update={
            "mcp_session_lease_s": 30.0,  # handed over on request, never lapsed
            "egress_allow_cidrs": ["127.0.0.0/8"],
            "journal_retry_s": 3.0,  # a clash in the journal fails a call within seconds
        }
    )
    async with (
        serve_app(create_app(settings)) as one,
        serve_app(create_app(settings)) as two,
        httpx.AsyncClient(headers=AUTH, timeout=60) as http,
    ):
        connector = await post_to(http, one, "connectors", _slow_connector(upstream.url))
        agent = await post_to(
            http, one, "agents", {"name": unique("shared"), "connector_ids": [connector["id"]]}
        )
        session = Session(http, agent["name"], "")
        await session.open(one)
        # Calls of 0.2 s each, sent to both workers at once: served one at a time, or they
        # would overlap in the journal.
        slow = {
            "name": "connector",
            "arguments": {
                "subcommand": "execute",
                "connector": connector["name"],
                "action": "wait",
                "parameters": {"delay": 0.2},
            },
        }
        rounds = 4
        results = await asyncio.gather(
            *(session.call(url, slow) for _ in range(rounds) for url in (one, two))
        )
        texts = [r.text[:300] for r in results]
        refused = [(r.status_code, r.text[:300]) for r in results if r.status_code != 200]
        assert not refused, refused
        assert not any(result_of(r).get("isError") for r in results), texts
        rows = await pg.fetch(
            "SELECT seq, kind, data::text AS data FROM run_events WHERE run_id = $1 ORDER BY seq",
            session.run_id,
        )
        ended = await http.delete(f"{two}/mcp/agents/{session.agent}", headers=session.headers)
        assert ended.status_code == 200, ended.text
    seqs = [r["seq"] for r in rows]
    assert seqs == list(range(1, len(seqs) + 1))  # no gap, no clash
    kinds = [r["kind"] for r in rows]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 2 * rounds
    # Each call's result follows its own call: no other worker's call came in between.
    for call, result in zip(rows[1::2], rows[2::2], strict=True):
        assert (call["kind"], result["kind"]) == ("tool_call", "tool_result")
        assert json.loads(call["data"])["call_id"] == json.loads(result["data"])["call_id"]


async def test_a_call_longer_than_the_lease_keeps_its_session(
    leased: Settings, pg: asyncpg.Connection, upstream: LocalServer
) -> None:
    settings = leased.model_copy(update={"egress_allow_cidrs": ["127.0.0.0/8"]})
    async with (
        serve_app(create_app(settings)) as one,
        serve_app(create_app(settings)) as two,
        httpx.AsyncClient(headers=AUTH, timeout=60) as http,
    ):
        connector = await post_to(http, one, "connectors", _slow_connector(upstream.url))
        agent = await post_to(
            http, one, "agents", {"name": unique("long"), "connector_ids": [connector["id"]]}
        )
        session = Session(http, agent["name"], "")
        await session.open(one)
        # A call of 3 s on worker 1: three leases long, renewed while it runs.
        slow, quick = (
            {
                "name": "connector",
                "arguments": {
                    "subcommand": "execute",
                    "connector": connector["name"],
                    "action": "wait",
                    "parameters": {"delay": delay},
                },
            }
            for delay in (3.0, 0)
        )
        in_flight = asyncio.create_task(session.call(one, slow))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        refused = await session.call(two, quick)  # asks for it, waits a lease and a second
        assert refused.status_code == 503, refused.text
        assert time.monotonic() - started >= LEASE_S
        assert not in_flight.done()
        first = await in_flight
        assert first.status_code == 200, first.text
        assert not result_of(first).get("isError"), first.text
        served = await session.call(two, quick)  # let go once the call was done
        assert served.status_code == 200, served.text
        rows = await pg.fetch(
            "SELECT seq, kind FROM run_events WHERE run_id = $1 ORDER BY seq", session.run_id
        )
    assert [r["seq"] for r in rows] == list(range(1, len(rows) + 1))
    assert [r["kind"] for r in rows] == ["run_started", *["tool_call", "tool_result"] * 2]


async def test_a_worker_stopping_releases_its_sessions(
    leased: Settings, pg: asyncpg.Connection
) -> None:
    async with httpx.AsyncClient(headers=AUTH, timeout=30) as http:
        async with serve_app(create_app(leased)) as one:
            session = await new_session(http, one)
            assert answered(await session.call(one))
            assert (await lease_of(pg, session.run_id))["valid"]
        released = await lease_of(pg, session.run_id)
    assert released["lease_until"] is None  # the next worker takes it at once
