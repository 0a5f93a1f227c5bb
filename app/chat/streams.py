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
"""What `live_events` yields for an idle `ping_s` (the stream sends a keep-alive comment)."""
LiveItem = tuple[int, RunEvent] | None


async def live_events(
    active: ActiveRun, queue: asyncio.Queue[Published], *, ping_s: float
) -> AsyncGenerator[LiveItem]:
    """The started run's events straight from the run task (no journal read on the hot path),
    `IDLE` after each quiet `ping_s`; ends after the terminal event, or without it when that
    event could not be stored (a replay picks it up later). Every door onto a run (`POST
    /chat`, the OpenAI-compatible API) reads its run through this."""
    try:
        while True:
            if queue.empty():  # wait, pinging while idle (a timer, not a task per event)
                try:
                    async with asyncio.timeout(ping_s):
                        item = await queue.get()
                except TimeoutError:
                    yield IDLE
                    continue
            else:
                item = queue.get_nowait()
            if item is None:
                return
            yield item
            active.first_out.set()
            if item[1].kind in TERMINAL_KINDS:
                return
    finally:
        active.first_out.set()
        active.unsubscribe(queue)


async def live_stream(
    active: ActiveRun, queue: asyncio.Queue[Published], *, ping_s: float
) -> AsyncIterator[bytes]:
    """`POST /chat`'s SSE frames of `live_events`."""
    events = live_events(active, queue, ping_s=ping_s)
    try:
        async for item in events:
            yield PING if item is None else event_frame(*item)
    finally:
        await events.aclose()


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
