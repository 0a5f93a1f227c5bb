"""MCP sessions between two gateways on one PostgreSQL database, in one test process.

Each app is a worker of its own (its own run manager, worker id and SDK session manager). A
client moves between them mid-session the way a load balancer would move it; approvals through
elicitation keep working on the worker that resumed the session, and a session no worker holds
any more ends once idle (not as a lost run).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.models import Run, RunEventRecord
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import upgrade
from app.main import create_app
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.fixtures.live import serve_app
from tests.mcpserver.test_endpoint import INITIALIZE, MCP_HEADERS, post, text, unique

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
async def db(committing_settings: Settings) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(committing_settings)
    try:
        yield create_sessionmaker(engine)
    finally:
        await engine.dispose()


async def run_and_events(
    db: async_sessionmaker[AsyncSession], run_id: uuid.UUID
) -> tuple[Run, list[RunEventRecord]]:
    async with db() as session:
        run = await session.get(Run, run_id)
        assert run is not None
        events = (
            await session.scalars(
                select(RunEventRecord)
                .where(RunEventRecord.run_id == run_id)
                .order_by(RunEventRecord.seq)
            )
        ).all()
        return run, list(events)


class Balancer:
    def __init__(self, url: str) -> None:
        self.url = url

    async def route(self, request: httpx.Request) -> None:
        target = httpx.URL(self.url)
        request.url = request.url.copy_with(port=target.port)
        request.headers["Host"] = f"{target.host}:{target.port}"


async def test_a_session_moves_between_live_workers_with_its_approvals(
    committing_settings: Settings, db: async_sessionmaker[AsyncSession]
) -> None:
    async with (
        serve_app(create_app(committing_settings)) as one,
        serve_app(create_app(committing_settings)) as two,
        httpx.AsyncClient(base_url=one, headers=AUTH, timeout=30) as admin,
    ):
        skill = await post(
            admin, "skills", {"name": unique("brew"), "description": "d", "content": "Steep."}
        )
        agent = await post(
            admin,
            "agents",
            {
                "name": unique("moving"),
                "skill_ids": [skill["id"]],
                "model_config_json": {"approval": {"tools": ["read_skill"]}},
            },
        )
        asked: list[str] = []

        async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={"approve": True})

        balancer = Balancer(one)
        http = httpx.AsyncClient(
            headers=AUTH, timeout=30, event_hooks={"request": [balancer.route]}
        )
        url = f"{one}/mcp/agents/{agent['name']}"
        async with (
            http,
            Client(
                streamable_http_client(url, http_client=http), elicitation_callback=person
            ) as client,
        ):
            for target in (one, two, one):  # worker 1, moved to 2, and back to a stale 1
                balancer.url = target
                result = await client.call_tool("read_skill", {"name": skill["name"]})
                assert not result.is_error, text(result)
                assert "Steep." in text(result)
            runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
            (listed,) = runs["items"]
            run_id = uuid.UUID(listed["id"])
            session_run, _ = await run_and_events(db, run_id)
            assert session_run.status == "running"
            balancer.url = two  # the client ends the session on the other worker
        run, events = await run_and_events(db, run_id)
    assert len(asked) == 3  # every worker put the approval to the client's person
    assert (run.status, run.iterations) == ("completed", 3)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    kinds = [e.kind for e in events]
    assert kinds.count("tool_result") == 3
    assert kinds.count("approval_resolved") == 3
    assert (kinds[0], kinds[-1]) == ("run_started", "run_finished")


async def test_a_session_no_worker_holds_ends_once_idle_not_as_lost(
    committing_settings: Settings, db: async_sessionmaker[AsyncSession]
) -> None:
    settings = committing_settings.model_copy(
        update={"worker_heartbeat_s": 0.2, "worker_lost_after_s": 0.6, "mcp_session_idle_s": 3.0}
    )
    async with (
        serve_app(create_app(settings)) as one,
        httpx.AsyncClient(base_url=one, headers=AUTH, timeout=30) as admin,
    ):
        skill = await post(
            admin, "skills", {"name": unique("idle"), "description": "d", "content": "c"}
        )
        agent = await post(admin, "agents", {"name": unique("handed"), "skill_ids": [skill["id"]]})
        opened = await admin.post(
            f"/mcp/agents/{agent['name']}", json=INITIALIZE, headers=MCP_HEADERS
        )
        assert opened.status_code == 200, opened.text
        run_id = uuid.UUID(hex=opened.headers["mcp-session-id"][:32])
    # Worker 1 stopped: the session is handed over, not ended.
    handed, _ = await run_and_events(db, run_id)
    assert handed.status == "running"
    async with serve_app(create_app(settings)):  # worker 2 sweeps what nobody holds
        for _ in range(400):
            run, events = await run_and_events(db, run_id)
            if run.status != "running":
                break
            await asyncio.sleep(0.05)
    assert run.status == "completed"
    assert [e.kind for e in events] == ["run_started", "run_finished"]


async def test_a_session_ends_with_delete_on_a_worker_that_never_served_it(
    committing_settings: Settings, db: async_sessionmaker[AsyncSession]
) -> None:
    async with (
        serve_app(create_app(committing_settings)) as one,
        serve_app(create_app(committing_settings)) as two,
        httpx.AsyncClient(headers=AUTH, timeout=30) as http,
    ):
        agent = await post_agent(http, one)
        opened = await http.post(f"{one}/mcp/agents/{agent}", json=INITIALIZE, headers=MCP_HEADERS)
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        session = MCP_HEADERS | {"Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-06-18"}
        ended = await http.delete(f"{two}/mcp/agents/{agent}", headers=session)
        assert ended.status_code == 200, ended.text
        run, events = await run_and_events(db, uuid.UUID(hex=session_id[:32]))
        assert run.status == "completed"
        assert [e.kind for e in events] == ["run_started", "run_finished"]
        for url in (one, two):  # gone everywhere
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            gone = await http.post(f"{url}/mcp/agents/{agent}", json=listing, headers=session)
            assert gone.status_code == 404


async def post_agent(http: httpx.AsyncClient, url: str) -> str:
    created = await http.post(f"{url}/api/v1/agents", json={"name": unique("ended")})
    assert created.status_code == 201, created.text
    name: str = created.json()["name"]
    return name


async def test_a_session_goes_on_after_a_restart_on_sqlite(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'quiver.db'}",
        data_dir=tmp_path,
        admin_token=ADMIN_TOKEN,
        secret_keys=[SECRET_KEY],
    )
    await asyncio.to_thread(upgrade, settings)
    async with (
        serve_app(create_app(settings)) as before,
        httpx.AsyncClient(base_url=before, headers=AUTH, timeout=30) as http,
    ):
        agent = await post_agent(http, before)
        opened = await http.post(f"/mcp/agents/{agent}", json=INITIALIZE, headers=MCP_HEADERS)
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
    session = MCP_HEADERS | {"Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-06-18"}
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with (
        serve_app(create_app(settings)) as after,  # the same store, a new process
        httpx.AsyncClient(base_url=after, headers=AUTH, timeout=30) as http,
    ):
        await asyncio.sleep(0.5)  # its first sweeps ran: the session was not closed as lost
        listed = await http.post(f"/mcp/agents/{agent}", json=listing, headers=session)
        assert listed.status_code == 200, listed.text
        assert '"tools"' in listed.text
        ended = await http.delete(f"/mcp/agents/{agent}", headers=session)
        assert ended.status_code == 200
        runs = (await http.get("/api/v1/runs")).json()
        (run,) = [r for r in runs["items"] if r["id"].replace("-", "") == session_id[:32]]
        assert (run["kind"], run["status"]) == ("mcp_session", "completed")
