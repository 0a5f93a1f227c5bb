"""JournalWriter: persists each RunEvent (redacted, numbered) before anyone sees it."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.hub import CHANNEL, RunHub
from app.chat.repository import RunRepository
from app.events import RunEvent, event_from_record, event_payload
from app.security.redact import redact


class JournalWriter:
    def __init__(
        self,
        *,
        run_id: uuid.UUID,
        sessionmaker: async_sessionmaker[AsyncSession],
        hub: RunHub,
        notify: bool,
    ) -> None:
        self.run_id = run_id
        self.seq = 0
        self.last_clean: RunEvent | None = None
        """The redacted form of the event last passed to `write` (even if storing it failed)."""
        self._sessionmaker = sessionmaker
        self._hub = hub
        self._notify = notify

    async def write(
        self, event: RunEvent, *, also: Callable[[AsyncSession], Awaitable[None]] | None = None
    ) -> tuple[int, RunEvent]:
        """Persist one event in its own short transaction; returns (seq, redacted event).

        `also` runs in the same transaction (the run's final state goes with its last event,
        so a reader never sees a finished run without its final event).
        """
        data = redact(event_payload(event))
        clean = event_from_record(event.kind, data)
        self.seq += 1
        self.last_clean = clean
        async with self._sessionmaker() as session:
            await RunRepository(session).append_event(self.run_id, self.seq, event.kind, data)
            if also is not None:
                await also(session)
            if self._notify:
                await session.execute(
                    text("SELECT pg_notify(:channel, :payload)"),
                    {"channel": CHANNEL, "payload": str(self.run_id)},
                )
            await session.commit()
        self._hub.wake(self.run_id)
        return self.seq, clean
