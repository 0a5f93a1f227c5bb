"""The journal: every RunEvent is persisted (redacted, numbered) before anyone sees it.

Events of all runs in this process are committed together: a `JournalBatcher` takes what
has queued up while the previous transaction ran and writes it in one transaction (one
multi-row INSERT, one NOTIFY per run). Under load that turns four round trips per event into
four per batch; a lone event still goes out at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.hub import CHANNEL, RunHub
from app.chat.models import RunEventRecord
from app.events import RunEvent, event_from_record, event_payload
from app.security.redact import redact

Also = Callable[[AsyncSession], Awaitable[None]]
logger = logging.getLogger("quiver.journal")
_MAX_BATCH = 500


@dataclass(eq=False)
class _Pending:
    run_id: uuid.UUID
    seq: int
    kind: str
    data: dict[str, Any]
    also: Also | None
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def row(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "seq": self.seq, "kind": self.kind, "data": self.data}


class JournalBatcher:
    def __init__(
        self, *, sessionmaker: async_sessionmaker[AsyncSession], hub: RunHub, notify: bool
    ) -> None:
        self._sessionmaker = sessionmaker
        self._hub = hub
        self._notify = notify
        self._queue: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None

    def enqueue(
        self, run_id: uuid.UUID, seq: int, kind: str, data: dict[str, Any], also: Also | None
    ) -> asyncio.Future[None]:
        """Queue one event; the future resolves once it is committed (or fails as storing it did).
        Events are committed in the order they were queued."""
        pending = _Pending(run_id=run_id, seq=seq, kind=kind, data=data, also=also)
        self._queue.append(pending)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="journal-batcher")
        return pending.done

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:_MAX_BATCH], self._queue[_MAX_BATCH:]
            try:
                await self._commit(batch)
            except Exception:
                # One bad event must not fail the others: retry each in its own transaction.
                for pending in batch:
                    try:
                        await self._commit([pending])
                    except Exception as exc:
                        if not pending.done.done():
                            pending.done.set_exception(exc)
            for pending in batch:
                if not pending.done.done():
                    pending.done.set_result(None)
            for run_id in {p.run_id for p in batch}:
                self._hub.wake(run_id)

    async def _commit(self, batch: list[_Pending]) -> None:
        async with self._sessionmaker() as session:
            await session.execute(insert(RunEventRecord), [p.row() for p in batch])
            for pending in batch:
                if pending.also is not None:
                    await pending.also(session)
            if self._notify:
                for run_id in dict.fromkeys(p.run_id for p in batch):
                    await session.execute(
                        text("SELECT pg_notify(:channel, :payload)"),
                        {"channel": CHANNEL, "payload": str(run_id)},
                    )
            await session.commit()

    async def aclose(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task


class JournalWriter:
    """One run's view of the journal: numbers its events and hands them to the batcher."""

    def __init__(self, *, run_id: uuid.UUID, batcher: JournalBatcher) -> None:
        self.run_id = run_id
        self.seq = 0
        self.last_clean: RunEvent | None = None
        """The redacted form of the event last passed to `write` (even if storing it failed)."""
        self._batcher = batcher

    def submit(
        self, event: RunEvent, *, also: Also | None = None
    ) -> tuple[int, RunEvent, asyncio.Future[None]]:
        """Number, redact and queue one event: (seq, redacted event, committed future).

        `also` runs in the same transaction (the run's final state goes with its last event,
        so a reader never sees a finished run without its final event).
        """
        data = redact(event_payload(event))
        clean = event_from_record(event.kind, data)
        self.seq += 1
        self.last_clean = clean
        stored = self._batcher.enqueue(self.run_id, self.seq, event.kind, data, also)
        return self.seq, clean, stored

    async def write(self, event: RunEvent, *, also: Also | None = None) -> tuple[int, RunEvent]:
        """Persist one event and wait for it: (seq, redacted event)."""
        seq, clean, stored = self.submit(event, also=also)
        await stored
        return seq, clean
