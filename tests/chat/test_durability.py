"""The journal never loses an event: the races and failures behind each guarantee."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.hub import RunHub
from app.chat.models import Run, RunEventRecord
from app.chat.pgwrite import asyncpg_dsn
from app.chat.repository import RunRepository
from app.chat.streams import replay_stream
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from tests.chat.test_faults import assert_complete, assert_usable, gateway, new_agent, replay
from tests.conftest import migrated_sqlite
from tests.fixtures.live import SseReader, read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


@pytest.fixture
async def pg_sessions(
    committing_settings: Settings,
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = create_engine(committing_settings)
    yield create_sessionmaker(engine)
    await engine.dispose()


async def _conversation(client: httpx.AsyncClient, agent_id: str) -> str:
    async with client.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": "hi"}
    ) as resp:
        assert resp.status_code == 200
        await read_sse(resp)
        return resp.headers["x-conversation-id"]


async def _ghost_run(
    sessions: async_sessionmaker[AsyncSession],
    conversation_id: str,
    agent_id: str,
    *,
    worker_id: uuid.UUID | None,
    events: int = 0,
) -> uuid.UUID:
    """A `running` run with `events` journaled events, as a killed worker leaves it
    (`worker_id` None: a worker that no longer exists)."""
    async with sessions() as session:
        owner = {} if worker_id is None else {"worker_id": worker_id}
        run = Run(conversation_id=uuid.UUID(conversation_id), agent_id=uuid.UUID(agent_id), **owner)
        session.add(run)
        await session.flush()
        for seq in range(1, events + 1):
            session.add(
                RunEventRecord(run_id=run.id, seq=seq, kind="model_delta", data={"text": "x"})
            )
        await session.commit()
        return run.id


async def test_replay_reads_the_journal_again_when_the_run_finished_meanwhile(
    committing_settings: Settings,
    scripted_llm: ScriptedLLM,
    pg_sessions: async_sessionmaker[AsyncSession],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run finishes between the follower's journal read and its status read."""
    async with gateway(committing_settings, llm_base_url=scripted_llm.base_url) as client:
        agent_id = await new_agent(client)
        conversation_id = await _conversation(client, agent_id)
    run_id = await _ghost_run(pg_sessions, conversation_id, agent_id, worker_id=None, events=2)

    async def finish_now() -> None:
        async with pg_sessions() as session:
            repo = RunRepository(session)
            data = {"status": "completed", "iterations": 1, "usage": {}, "elapsed_ms": 1.0}
            await repo.append_event(run_id, 3, "run_finished", data)
            await repo.finish(run_id, status="completed", iterations=1, usage={})
            await session.commit()

    real_events_after = RunRepository.events_after
    raced: list[bool] = []

    async def events_after(self: RunRepository, rid: uuid.UUID, seq: int) -> list[Any]:
        rows = await real_events_after(self, rid, seq)
        if not rows and not raced:
            raced.append(True)
            await finish_now()  # committed right after the journal read
        return rows

    monkeypatch.setattr(RunRepository, "events_after", events_after)
    frames = [
        frame async for frame in replay_stream(pg_sessions, RunHub(), run_id, after=2, ping_s=15.0)
    ]
    assert raced
    assert len(frames) == 1
    assert frames[0].startswith(b"id: 3\nevent: run_finished\n")


async def test_cancel_of_a_run_whose_worker_died_closes_it_at_once(
    committing_settings: Settings,
    scripted_llm: ScriptedLLM,
    pg_sessions: async_sessionmaker[AsyncSession],
) -> None:
    # no heartbeat sweep during the test: only the cancel can close the run
    async with gateway(
        committing_settings, llm_base_url=scripted_llm.base_url, worker_heartbeat_s=600.0
    ) as client:
        agent_id = await new_agent(client)
        conversation_id = await _conversation(client, agent_id)
        run_id = await _ghost_run(pg_sessions, conversation_id, agent_id, worker_id=None, events=4)
        cancelled = await client.post(f"/api/v1/runs/{run_id}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json()["status"] == "failed"
        events = await replay(client, str(run_id))
        assert [e.id for e in events] == [1, 2, 3, 4, 5]
        assert (events[-1].event, events[-1].data["error"]["code"]) == ("run_failed", "run_lost")
        scripted_llm.script(Turn(text="free again"))
        body = {"agent_id": agent_id, "message": "next", "conversation_id": conversation_id}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            assert resp.status_code == 200
            assert (await read_sse(resp))[-1].data["status"] == "completed"


async def test_one_running_run_per_conversation_on_sqlite(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    settings = await migrated_sqlite(tmp_path / "data", llm_base_url=scripted_llm.base_url)
    async with gateway(settings) as client:
        agent_id = await new_agent(client)
        conversation_id = await _conversation(client, agent_id)
        # the run that gets in stays running until the test cancels it
        scripted_llm.script(*[Turn(text="held", delay_s=60.0)] * 100)

        async def one(i: int) -> tuple[int, str | None]:
            body = {"agent_id": agent_id, "message": f"m{i}", "conversation_id": conversation_id}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                return resp.status_code, resp.headers.get("x-run-id")

        answers = await asyncio.gather(*(one(i) for i in range(100)))
        started = [run_id for code, run_id in answers if code == 200]
        for run_id in started:
            await client.post(f"/api/v1/runs/{run_id}/cancel")
        assert sorted(code for code, _ in answers) == [200] + [409] * 99
        assert (await replay(client, started[0]))[-1].data["status"] == "cancelled"
        engine = create_engine(settings)
        try:
            async with create_sessionmaker(engine)() as session:
                stmt = select(func.count()).where(Run.conversation_id == uuid.UUID(conversation_id))
                assert await session.scalar(stmt) == 2
        finally:
            await engine.dispose()


_REFUSE = """
CREATE FUNCTION refuse_marked_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.data::text LIKE '%refuse-this-event%' THEN
        RAISE EXCEPTION 'event refused by the test' USING ERRCODE = '22000';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_marked_events BEFORE INSERT ON run_events
    FOR EACH ROW EXECUTE FUNCTION refuse_marked_events();
"""
_ALLOW = """
DROP TRIGGER IF EXISTS refuse_marked_events ON run_events;
DROP FUNCTION IF EXISTS refuse_marked_events();
"""


@pytest.fixture
async def refusing_store(committing_settings: Settings) -> AsyncIterator[Settings]:
    """The store refuses (a data error, not worth retrying) any event whose payload contains
    `refuse-this-event`: a trigger, as a constraint of the operator's would."""
    dsn = asyncpg_dsn(committing_settings.async_database_url)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(_REFUSE)
        yield committing_settings
    finally:
        await conn.execute(_ALLOW)
        await conn.close()


async def test_an_event_storage_refuses_fails_the_run_without_a_gap(
    refusing_store: Settings, scripted_llm: ScriptedLLM
) -> None:
    """The store refuses one model delta: the run fails at that event, nothing after it."""
    async with gateway(refusing_store, llm_base_url=scripted_llm.base_url) as client:
        agent_id = await new_agent(client)
        scripted_llm.script(Turn(text="one two refuse-this-event four five", token_delay_s=0.01))
        body = {"agent_id": agent_id, "message": "go"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            run_id = resp.headers["x-run-id"]
            live = await asyncio.wait_for(SseReader(resp).read(), 30)
        assert_complete(live)
        assert "refuse-this-event" not in "".join(e.data.get("text", "") for e in live)
        assert live[-1].event == "run_failed"
        assert live[-1].data["error"]["code"] == "journal_unavailable"
        assert await replay(client, run_id) == live
        await assert_usable(client, scripted_llm, agent_id, live[0].data["conversation_id"])


async def test_one_running_run_per_conversation_across_two_workers(
    committing_settings: Settings, scripted_llm: ScriptedLLM
) -> None:
    settings = committing_settings.model_copy(update={"llm_base_url": scripted_llm.base_url})
    async with gateway(settings) as first, gateway(settings) as second:
        agent_id = await new_agent(first)
        conversation_id = await _conversation(first, agent_id)
        scripted_llm.script(*[Turn(text="held", delay_s=60.0)] * 40)

        async def one(client: httpx.AsyncClient, i: int) -> tuple[int, str | None]:
            body = {"agent_id": agent_id, "message": f"m{i}", "conversation_id": conversation_id}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                return resp.status_code, resp.headers.get("x-run-id")

        answers = await asyncio.gather(*(one((first, second)[i % 2], i) for i in range(40)))
        started = [run_id for code, run_id in answers if code == 200]
        for run_id in started:
            await second.post(f"/api/v1/runs/{run_id}/cancel")
        assert sorted(code for code, _ in answers) == [200] + [409] * 39
        assert (await replay(first, started[0]))[-1].data["status"] == "cancelled"
