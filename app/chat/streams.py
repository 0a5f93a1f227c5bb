"""Chat streams: the live stream of a started run, and journal replay that follows live."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator, AsyncIterator

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.active import ActiveRun, Published
from app.chat.hub import RunHub
from app.chat.repository import RUNNING, RunRepository
from app.chat.sse import PING, event_frame, frame
from app.events import TERMINAL_KINDS, RunEvent
from app.tenancy.principal import Principal

_POLL_S = 1.0


IDLE = None
"""What `live_batches` yields for an idle `ping_s` (the stream sends a keep-alive comment)."""
LiveItem = tuple[int, RunEvent] | None


async def live_batches(
    active: ActiveRun, queue: asyncio.Queue[Published], *, ping_s: float
) -> AsyncGenerator[list[tuple[int, RunEvent]] | None]:
    """The started run's events straight from the run task (no journal read on the hot path),
    as many as are queued at a time (a busy process hands a stream several at once), `IDLE`
    after each quiet `ping_s`; ends after the terminal event, or without it when that event
    could not be stored (a replay picks it up later). The run's `first_out` is set once the
    consumer asks for more after its first events (they were sent)."""
    try:
        while True:
            if queue.empty():  # wait, pinging while idle (a timer, not a task per event)
                try:
                    async with asyncio.timeout(ping_s):
                        first = await queue.get()
                except TimeoutError:
                    yield IDLE
                    continue
            else:
                first = queue.get_nowait()
            batch: list[tuple[int, RunEvent]] = []
            item: Published = first
            while item is not None:
                batch.append(item)
                if item[1].kind in TERMINAL_KINDS or queue.empty():
                    break
                item = queue.get_nowait()
            if batch:
                yield batch
                active.first_out.set()
            if item is None or item[1].kind in TERMINAL_KINDS:
                return
    finally:
        active.first_out.set()
        active.unsubscribe(queue)


async def live_events(
    active: ActiveRun, queue: asyncio.Queue[Published], *, ping_s: float
) -> AsyncGenerator[LiveItem]:
    """`live_batches` one event at a time. Every door onto a run (`POST /chat`, the
    OpenAI-compatible API) reads its run through `live_batches`."""
    batches = live_batches(active, queue, ping_s=ping_s)
    try:
        async for batch in batches:
            if batch is IDLE:
                yield IDLE
                continue
            for item in batch:
                yield item
    finally:
        await batches.aclose()


async def live_stream(
    active: ActiveRun, queue: asyncio.Queue[Published], *, ping_s: float
) -> AsyncIterator[bytes]:
    """`POST /chat`'s SSE frames of `live_batches`: the events queued together in one write."""
    batches = live_batches(active, queue, ping_s=ping_s)
    try:
        async for batch in batches:
            yield PING if batch is IDLE else b"".join(event_frame(*item) for item in batch)
    finally:
        await batches.aclose()


async def ensure_run(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: uuid.UUID, principal: Principal
) -> None:
    """404 unless the run exists and the caller may see it."""
    async with sessionmaker() as session:
        principal.owned(await RunRepository(session).get(run_id), "run", run_id)


async def replay_stream(
    sessionmaker: async_sessionmaker[AsyncSession],
    hub: RunHub,
    run_id: uuid.UUID,
    *,
    after: int,
    ping_s: float,
) -> AsyncIterator[bytes]:
    """Every journaled event after `after`, then live ones until the run's last event."""
    waiter = hub.waiter(run_id)
    last, idle = after, 0.0
    finished_seen = False
    try:
        while True:
            waiter.clear()
            async with sessionmaker() as session:
                repo = RunRepository(session)
                rows = await repo.events_after(run_id, last)
                run = None if rows else await repo.get(run_id)
            for row in rows:
                yield frame(row.seq, row.kind, row.data)
                last = row.seq
                if row.kind in TERMINAL_KINDS:
                    return
            if rows:
                idle = 0.0
                continue
            if run is None:
                return  # deleted with its conversation
            if run.status != RUNNING:
                # It finished after the journal read: its final event is stored with the
                # status, so read the journal again before ending.
                if finished_seen:
                    return
                finished_seen = True
                continue
            try:
                await asyncio.wait_for(waiter.wait(), _POLL_S)
            except TimeoutError:
                idle += _POLL_S
                if idle >= ping_s:
                    idle = 0.0
                    yield PING
    finally:
        hub.drop(run_id, waiter)
