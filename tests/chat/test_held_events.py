"""A run stored with its first event (`_Deferred`, Postgres) holds its later events until the
start write returns (`JournalWriter`'s `after`). The start writer releases them in its own step,
before the run's `stored` settles (`ready`), and the journal settles the very futures the run
holds: no loop turn between the journal's commit and the run's publisher learning of it
(docs/benchmarks.md, "Side by side V")."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest

from app.agents.models import Agent
from app.chat.hub import RunHub
from app.chat.journal import JournalBatcher, JournalUnavailable, JournalWriter
from app.chat.pgwrite import asyncpg_dsn
from app.chat.run_store_pg import RunStarts, _Deferred
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.errors import NotFound
from app.events import ModelDelta, RunStarted, event_payload
from tests.chat.test_run_starts import new_run


class Ticks:
    """Counts event loop turns: one step of its task per turn."""

    def __init__(self) -> None:
        self.now = 0
        self._task = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self.now += 1
            await asyncio.sleep(0)

    def stop(self) -> None:
        self._task.cancel()


class Rig:
    def __init__(self, settings: Settings) -> None:
        self.dsn = asyncpg_dsn(settings.async_database_url)
        self.engine = create_engine(settings)
        self.starts = RunStarts(self.dsn, size=1)
        self.batcher = JournalBatcher(
            sessionmaker=create_sessionmaker(self.engine), hub=RunHub(notify=True), dsn=self.dsn
        )
        self.agent_id = uuid.uuid4()

    async def aclose(self) -> None:
        await self.batcher.aclose()
        await self.starts.aclose()
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute("DELETE FROM conversations WHERE agent_id = $1", self.agent_id)
            await conn.execute("DELETE FROM agents WHERE id = $1", self.agent_id)
        finally:
            await conn.close()
        await self.engine.dispose()

    def deferred(self, agent_id: uuid.UUID) -> tuple[_Deferred, uuid.UUID]:
        new = new_run(agent_id, "held")
        return _Deferred(starts=self.starts, new=new), new.run_id


@pytest.fixture
async def rig(committing_settings: Settings) -> AsyncIterator[Rig]:
    rig = Rig(committing_settings)
    async with create_sessionmaker(rig.engine)() as session:
        session.add(Agent(id=rig.agent_id, name=f"held-{rig.agent_id.hex[:8]}"))
        await session.commit()
    try:
        yield rig
    finally:
        await rig.aclose()


def first_event(run_id: uuid.UUID) -> RunStarted:
    return RunStarted(run_id=str(run_id), conversation_id="c", agent_id="a", modes={}, tools=[])


def recorder(
    told: list[tuple[bool, bool, str | None]],
    stored: asyncio.Future[None],
    then: Callable[[bool], None],
) -> Callable[[bool], None]:
    def ready(was_stored: bool) -> None:
        task = asyncio.current_task()
        told.append((was_stored, stored.done(), task.get_name() if task is not None else None))
        then(was_stored)

    return ready


async def test_held_events_are_released_in_the_start_writers_step_and_settled_by_the_journal(
    rig: Rig,
) -> None:
    deferred, run_id = rig.deferred(rig.agent_id)
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    writer = JournalWriter(run_id=run_id, batcher=rig.batcher, after=stored)
    seq, _clean, data = writer.first(first_event(run_id))
    told: list[tuple[bool, bool, str | None]] = []
    write = deferred.store(("run_started", data), stored, recorder(told, stored, writer.release))
    held = [writer.submit(ModelDelta(text=word)) for word in ("one", "two")]
    assert [h[0] for h in held] == [2, 3]

    ticks = Ticks()
    committed_at: list[int] = []
    settled_at: dict[int, int] = {}
    fast = rig.batcher._fast
    assert fast is not None
    real_write = fast.write

    async def write_and_note(*args: Any, **kwargs: Any) -> None:
        await real_write(*args, **kwargs)
        committed_at.append(ticks.now)

    fast.write = write_and_note  # type: ignore[method-assign]  # the real write, timed
    for n, (_seq, _event, done) in enumerate(held):
        done.add_done_callback(lambda _f, n=n: settled_at.setdefault(n, ticks.now))
    try:
        await write
        await stored
        await asyncio.gather(*(done for _seq, _event, done in held))
    finally:
        ticks.stop()

    # Released by the start writer, in its task, before the run's `stored` was settled.
    assert told == [(True, False, "run-starts")]
    # One batch; its futures' callbacks ran in the turn after it returned (a future chained
    # to the journal's own would be settled a turn later, and its callbacks one more).
    assert len(committed_at) == 1
    assert settled_at == {0: committed_at[0] + 1, 1: committed_at[0] + 1}
    conn = await asyncpg.connect(rig.dsn)
    try:
        rows = await conn.fetch(
            "SELECT seq, kind FROM run_events WHERE run_id = $1 ORDER BY seq", run_id
        )
    finally:
        await conn.close()
    assert [(r["seq"], r["kind"]) for r in rows] == [
        (seq, "run_started"),
        (2, "model_delta"),
        (3, "model_delta"),
    ]
    assert event_payload(held[0][1]) == {"text": "one"}


async def test_a_run_that_was_not_stored_fails_its_held_events(rig: Rig) -> None:
    deferred, run_id = rig.deferred(uuid.uuid4())  # an agent that does not exist
    stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    writer = JournalWriter(run_id=run_id, batcher=rig.batcher, after=stored)
    _seq, _clean, data = writer.first(first_event(run_id))
    told: list[tuple[bool, bool, str | None]] = []
    write = deferred.store(("run_started", data), stored, recorder(told, stored, writer.release))
    _seq2, _event, held = writer.submit(ModelDelta(text="never"))
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await write
    with pytest.raises(NotFound):
        await stored
    with pytest.raises(JournalUnavailable):
        await held
    assert told == [(False, False, "run-starts")]
    # Released once: the done callback on `stored` that follows finds nothing left to do.
    _seq3, _event3, later = writer.submit(ModelDelta(text="after"))
    with pytest.raises(JournalUnavailable):
        await later
