"""The journal: every RunEvent is persisted (redacted, numbered) before anyone sees it.

Events of all runs in this process are committed together: a `JournalBatcher` takes what
has queued up while the previous write ran and writes it at once. On Postgres that is one
statement on a dedicated connection (`app/chat/pgwrite.py`: the events as arrays through
`unnest`, the final state of the runs that ended, one NOTIFY per run); elsewhere one
transaction with a multi-row INSERT. A lone event still goes out at once.

The journal never has a gap: while storage is unreachable (a database restart) a batch is
retried with backoff for up to `journal_retry_s`. An event that still cannot be stored marks
its run broken: the run's later events are refused, and its final event (`run_failed`) takes
the failed event's number.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.record import AuditRow
from app.chat.hub import CHANNEL, RunHub
from app.chat.pgwrite import JournalConnection, Settle
from app.chat.repository import ConversationRepository, JournalRepository, RunRepository
from app.chat.sqlitewrite import SqliteJournal
from app.db import storable
from app.events import RunEvent, event_from_record, event_payload
from app.security.redact import redact

Also = Callable[[AsyncSession], Awaitable[None]] | Settle
"""What is stored with an event: a run's final state, or any writes in the same transaction
(a callable takes the session path)."""
logger = logging.getLogger("quiver.journal")
_MAX_BATCH = 500


@dataclass(eq=False)
class _Pending:
    run_id: uuid.UUID
    seq: int
    kind: str
    data: dict[str, Any]
    also: Also | None
    audit: Sequence[AuditRow] = ()
    """Tool-call audit rows stored in the same write (an MCP session's calls)."""
    done: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    def row(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "seq": self.seq, "kind": self.kind, "data": self.data}


class JournalUnavailable(Exception):
    """An event of the run could not be stored: later events are refused (never a gap)."""


_TRANSIENT_STATES = ("08", "40", "53", "57P")
"""SQLSTATE classes: connection lost, transaction rollback, resources, server shutting down or
starting up."""


def _sqlstate(exc: BaseException) -> str:
    """The SQLSTATE of an asyncpg error, raw or wrapped by SQLAlchemy ("" if none)."""
    state = getattr(exc, "sqlstate", None)
    if isinstance(exc, DBAPIError):
        state = getattr(exc.orig, "sqlstate", None)
    return state if isinstance(state, str) else ""


_SQLITE_REFUSALS = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.ProgrammingError)
"""Raised as they are by the SQLite writer's raw batch (`app/chat/sqlitewrite.py`)."""


def is_transient(exc: BaseException) -> bool:
    """Storage errors worth retrying (connection lost, server restarting, pool exhausted,
    SQLite busy); constraint and data errors are not."""
    if isinstance(exc, IntegrityError | DataError | ProgrammingError | TypeError | ValueError):
        return False
    if isinstance(exc, _SQLITE_REFUSALS):
        return False
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    state = _sqlstate(exc)
    if state:
        return state.startswith(_TRANSIENT_STATES)
    return True


def is_conflict(exc: BaseException) -> bool:
    """A constraint refused the write (through SQLAlchemy, raw asyncpg or raw sqlite3)."""
    if isinstance(exc, IntegrityError | sqlite3.IntegrityError):
        return True
    return _sqlstate(exc).startswith("23")


class JournalBatcher:
    def __init__(
        self,
        *,
        sessionmaker: async_sessionmaker[AsyncSession],
        hub: RunHub,
        retry_s: float = 60.0,
        dsn: str | None = None,
        sqlite: SqliteJournal | None = None,
    ) -> None:
        """`dsn`: write through a dedicated asyncpg connection (Postgres, when the app owns
        its storage); `sqlite`: batches of events and audit rows through the SQLite writer;
        otherwise through sessions of `sessionmaker`."""
        self._sessionmaker = sessionmaker
        self._fast = JournalConnection(dsn) if dsn else None
        self._sqlite = sqlite
        self._hub = hub
        self._retry_s = retry_s
        self._queue: list[_Pending] = []
        self._task: asyncio.Task[None] | None = None
        self._broken: dict[uuid.UUID, int] = {}

    def broken_at(self, run_id: uuid.UUID) -> int | None:
        """The seq of the run's first event that could not be stored, if any."""
        return self._broken.get(run_id)

    def mend(self, run_id: uuid.UUID) -> None:
        """Accept the run's events again (its final event replaces the one that failed)."""
        self._broken.pop(run_id, None)

    def release(self, run_id: uuid.UUID) -> None:
        """The run is over: forget its state."""
        self._broken.pop(run_id, None)

    def enqueue(
        self,
        run_id: uuid.UUID,
        seq: int,
        kind: str,
        data: dict[str, Any],
        also: Also | None,
        audit: Sequence[AuditRow] = (),
    ) -> asyncio.Future[None]:
        """Queue one event; the future resolves once it is committed (or fails as storing it did).
        Events are committed in the order they were queued."""
        pending = _Pending(run_id=run_id, seq=seq, kind=kind, data=data, also=also, audit=audit)
        self._queue.append(pending)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain(), name="journal-batcher")
        return pending.done

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:_MAX_BATCH], self._queue[_MAX_BATCH:]
            batch = [p for p in batch if not self._refused(p)]
            try:
                await self._commit_retrying(batch)
            except Exception as exc:
                if is_transient(exc):  # storage stayed away for `retry_s`: these runs fail
                    for pending in batch:
                        self._fail(pending, exc)
                else:  # one bad event must not fail the other runs: each in its own transaction
                    for pending in batch:
                        if self._refused(pending):
                            continue
                        try:
                            await self._commit_retrying([pending])
                        except Exception as single:
                            self._fail(pending, single)
            for pending in batch:
                if not pending.done.done():
                    pending.done.set_result(None)
            for run_id in {p.run_id for p in batch}:
                self._hub.wake(run_id)

    def _refused(self, pending: _Pending) -> bool:
        broken = self._broken.get(pending.run_id)
        if broken is None or pending.seq < broken:
            return False
        if not pending.done.done():
            pending.done.set_exception(
                JournalUnavailable(f"event {broken} of run {pending.run_id} was not stored")
            )
        return True

    def _fail(self, pending: _Pending, exc: Exception) -> None:
        broken = self._broken.get(pending.run_id)
        if broken is None or pending.seq < broken:
            self._broken[pending.run_id] = pending.seq
        if not pending.done.done():
            pending.done.set_exception(exc)

    async def _commit_retrying(self, batch: list[_Pending]) -> None:
        """Commit, retrying with backoff while storage is unreachable (up to `retry_s`)."""
        if not batch:
            return
        deadline = time.monotonic() + self._retry_s
        delay, interrupted = 0.05, False
        while True:
            try:
                await self._commit(batch)
                return
            except Exception as exc:
                if is_conflict(exc):
                    if interrupted and await self._stored(batch):
                        # The connection broke after the commit was sent, and it did go through.
                        return
                    raise
                if not is_transient(exc) or time.monotonic() + delay > deadline:
                    raise
                if not interrupted:
                    logger.warning("storing run events failed (%s); retrying", type(exc).__name__)
                interrupted = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _stored(self, batch: list[_Pending]) -> bool:
        """Is every event of the batch in the journal already?"""
        wanted = {(p.run_id, p.seq, p.kind) for p in batch}
        async with self._sessionmaker() as session:
            found = await JournalRepository(session).present(
                {p.run_id for p in batch}, {p.seq for p in batch}
            )
        return wanted <= found

    async def _commit(self, batch: list[_Pending]) -> None:
        settles = [p.also for p in batch if isinstance(p.also, Settle)]
        if self._fast is not None and all(
            p.also is None or isinstance(p.also, Settle) for p in batch
        ):
            events = [(p.run_id, p.seq, p.kind, p.data) for p in batch]
            audit = [row for p in batch for row in p.audit]
            await self._fast.write(events, settles, CHANNEL if self._hub.notify else "", audit)
            return
        if self._sqlite is not None and not self._hub.notify and all(p.also is None for p in batch):
            await self._sqlite.write([p.row() for p in batch], [r for p in batch for r in p.audit])
            return
        async with self._sessionmaker() as session:
            await JournalRepository(session).insert([p.row() for p in batch])
            session.add_all([row.to_orm() for p in batch for row in p.audit])
            for pending in batch:
                if isinstance(pending.also, Settle):
                    await settle_in_session(session, pending.also)
                elif pending.also is not None:
                    await pending.also(session)
            for run_id in dict.fromkeys(p.run_id for p in batch):
                await self._hub.announce(session, run_id)
            await session.commit()

    async def aclose(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        if self._fast is not None:
            await self._fast.aclose()
        if self._sqlite is not None:
            await self._sqlite.aclose()


async def settle_in_session(session: AsyncSession, settle: Settle) -> None:
    """A run's final state and its conversation's new messages (the session path)."""
    if settle.conversation_id is not None and settle.messages:
        await ConversationRepository(session).add_messages(
            settle.conversation_id, settle.run_id, settle.messages
        )
    await RunRepository(session).finish(
        settle.run_id,
        status=settle.status,
        iterations=settle.iterations,
        usage=settle.usage,
        error=settle.error,
    )


def copy_outcome(target: asyncio.Future[None], source: asyncio.Future[None]) -> None:
    """Settle `target` as `source` was settled (a done callback of `source`)."""
    if target.done():
        return
    if source.cancelled():
        target.cancel()
    elif (exc := source.exception()) is not None:
        target.set_exception(exc)
    else:
        target.set_result(None)


class JournalWriter:
    """One run's view of the journal: numbers its events and hands them to the batcher."""

    def __init__(
        self,
        *,
        run_id: uuid.UUID,
        batcher: JournalBatcher,
        after: asyncio.Future[None] | None = None,
    ) -> None:
        """`after`: the write that stores the run itself, still in flight: events submitted
        before it is done are held, then queued in order (or failed, if it failed)."""
        self.run_id = run_id
        self.seq = 0
        self._batcher = batcher
        self._held: list[_Pending] | None = None
        self._unstored = False
        if after is not None and not (
            after.done() and not after.cancelled() and after.exception() is None
        ):
            self._held = []
            after.add_done_callback(self._release)

    def _release(self, after: asyncio.Future[None]) -> None:
        held, self._held = self._held or [], None
        self._unstored = after.cancelled() or after.exception() is not None
        for pending in held:
            if self._unstored:
                pending.done.set_exception(self._not_stored())
                continue
            stored = self._batcher.enqueue(
                pending.run_id, pending.seq, pending.kind, pending.data, pending.also, pending.audit
            )
            stored.add_done_callback(partial(copy_outcome, pending.done))

    def _not_stored(self) -> JournalUnavailable:
        return JournalUnavailable(f"run {self.run_id} was not stored")

    def submit(
        self, event: RunEvent, *, also: Also | None = None, audit: Sequence[AuditRow] = ()
    ) -> tuple[int, RunEvent, asyncio.Future[None]]:
        """Number, redact and queue one event: (seq, redacted event, committed future).

        `also` runs in the same transaction (the run's final state goes with its last event,
        so a reader never sees a finished run without its final event).
        """
        data, clean = self._clean(event)
        self.seq += 1
        if self._held is not None or self._unstored:
            pending = _Pending(
                run_id=self.run_id,
                seq=self.seq,
                kind=event.kind,
                data=data,
                also=also,
                audit=audit,
            )
            if self._held is None:
                pending.done.set_exception(self._not_stored())
            else:
                self._held.append(pending)
            return self.seq, clean, pending.done
        stored = self._batcher.enqueue(self.run_id, self.seq, event.kind, data, also, audit)
        return self.seq, clean, stored

    @staticmethod
    def _clean(event: RunEvent) -> tuple[dict[str, Any], RunEvent]:
        payload = event_payload(event)
        data = storable.value(redact(payload))
        # Most events (model deltas) have nothing to redact: the event itself is the clean one.
        return data, event if data == payload else event_from_record(event.kind, data)

    def first(self, event: RunEvent) -> tuple[int, RunEvent, dict[str, Any]]:
        """Number and redact the run's first event without queuing it: the caller stores it
        with the run itself (`RunStarts`). (seq 1, redacted event, its stored payload)."""
        assert self.seq == 0, "only the run's first event"
        data, clean = self._clean(event)
        self.seq = 1
        return 1, clean, data

    @property
    def broken(self) -> bool:
        """Did storing one of this run's events fail (so later ones are refused)?"""
        return self._batcher.broken_at(self.run_id) is not None

    async def write(self, event: RunEvent, *, also: Also | None = None) -> tuple[int, RunEvent]:
        """Persist one event and wait for it: (seq, redacted event).

        After a storing failure the event takes the place of the first one that was not
        stored, so the journal stays contiguous."""
        broken = self._batcher.broken_at(self.run_id)
        if broken is not None:
            self.seq = broken - 1
            self._batcher.mend(self.run_id)
        seq, clean, stored = self.submit(event, also=also)
        await stored
        return seq, clean
