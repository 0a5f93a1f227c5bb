"""New runs are stored in batches (`RunStarts`, app/chat/run_store_pg.py): a burst of starts goes
out in a few statements, and a run the store refuses fails alone."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace

import asyncpg
import pytest

from app.agents.models import Agent
from app.chat.pgwrite import asyncpg_dsn
from app.chat.run_store_pg import NewRun, RunStarts
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker


def new_run(agent_id: uuid.UUID, message: str) -> NewRun:
    return NewRun(
        run_id=uuid.uuid4(),
        conversation_id=uuid.uuid4(),
        agent_id=agent_id,
        title=message,
        message=message,
        api_key_id=None,
        user=None,
        worker_id=uuid.uuid4(),
    )


async def test_a_burst_of_starts_is_stored_and_a_refused_run_fails_alone(
    committing_settings: Settings,
) -> None:
    dsn = asyncpg_dsn(committing_settings.async_database_url)
    conn = await asyncpg.connect(dsn)
    starts = RunStarts(dsn, size=2)
    agent_id = uuid.uuid4()
    try:
        engine = create_engine(committing_settings)
        try:
            async with create_sessionmaker(engine)() as session:
                session.add(Agent(id=agent_id, name=f"starts-{agent_id.hex[:8]}"))
                await session.commit()
        finally:
            await engine.dispose()
        good = [
            replace(new_run(agent_id, f"m{i}"), event=("run_started", {"n": i}) if i % 2 else None)
            for i in range(20)
        ]
        bad = new_run(uuid.uuid4(), "no such agent")
        runs = [*good[:10], bad, *good[10:]]
        results = await asyncio.gather(
            *(starts.insert(run) for run in runs), return_exceptions=True
        )
        assert isinstance(results[10], asyncpg.ForeignKeyViolationError)
        assert [r for i, r in enumerate(results) if i != 10] == [None] * 20
        stored = await conn.fetch(
            "SELECT r.id, r.status, m.content, m.seq FROM runs r "
            "JOIN messages m ON m.run_id = r.id WHERE r.agent_id = $1",
            agent_id,
        )
        assert sorted((row["id"], row["content"]) for row in stored) == sorted(
            (run.run_id, run.message) for run in good
        )
        assert {(row["status"], row["seq"]) for row in stored} == {("running", 1)}
        assert not await conn.fetchval("SELECT count(*) FROM runs WHERE id = $1", bad.run_id)
        # a run's first event is stored with it (seq 1), when it has one
        events = await conn.fetch(
            "SELECT run_id, seq, kind, data FROM run_events WHERE run_id = ANY($1::uuid[])",
            [run.run_id for run in runs],
        )
        assert sorted(
            (e["run_id"], e["seq"], e["kind"], json.loads(e["data"])) for e in events
        ) == sorted((run.run_id, 1, "run_started", run.event[1]) for run in good if run.event)
    finally:
        await starts.aclose()
        await conn.execute("DELETE FROM agents WHERE id = $1", agent_id)
        await conn.close()


@pytest.mark.parametrize("count", [1, 3])
async def test_starts_of_a_deleted_agent_fail(committing_settings: Settings, count: int) -> None:
    dsn = asyncpg_dsn(committing_settings.async_database_url)
    starts = RunStarts(dsn, size=1)
    try:
        gone = uuid.uuid4()
        results = await asyncio.gather(
            *(starts.insert(new_run(gone, "x")) for _ in range(count)), return_exceptions=True
        )
        assert all(isinstance(r, asyncpg.ForeignKeyViolationError) for r in results)
    finally:
        await starts.aclose()


async def test_the_one_waiting_is_told_in_the_writers_own_step(
    committing_settings: Settings,
) -> None:
    """`then` runs as the writer settles the write, not as a done callback a loop turn later
    (in a burst, that turn is tens of ms before each run's first event)."""
    dsn = asyncpg_dsn(committing_settings.async_database_url)
    starts = RunStarts(dsn, size=1)
    told: list[tuple[bool, str | None]] = []

    def then(write: asyncio.Future[None]) -> None:
        task = asyncio.current_task()  # None in a done callback
        told.append((write.done(), task.get_name() if task is not None else None))

    try:
        stored = starts.submit(new_run(uuid.uuid4(), "no such agent"), then=then)
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await stored
        assert told == [(True, "run-starts")]
    finally:
        await starts.aclose()
