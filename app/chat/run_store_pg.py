"""`PostgresRunStore`: runs stored as they start, in one statement each, on plain asyncpg
connections (the Postgres implementation of `RunStartStore`, see `run_store.py`).

Starting runs in new conversations stores the conversations, the runs, the users' messages and
each run's first event (`run_started`) in one statement (data-modifying CTEs over `unnest`
arrays; atomic without a transaction block, so one round trip for every start queued meanwhile).
Continuing a conversation is one statement too: the run and the user's message are inserted
only when the conversation is the caller's and the agent's, and the same statement returns the
history before that message. When it inserts nothing (unknown conversation, someone else's,
another agent's, a run still in progress: the unique index on running runs refuses it), the
session store tells those cases apart (and closes a run whose worker died instead of answering
409). Neither goes through the ORM or the SQLAlchemy pool (and so pays no pre-ping): a small
asyncpg pool of its own, where a start that meets a connection the server dropped is tried
again on the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import asyncpg

from app.chat.active import StoredMessage, history_from_rows
from app.chat.journal import copy_outcome
from app.chat.run_store import FirstEvent, Opened, RunStart, agent_gone
from app.chat.run_store_session import SessionRunStore
from app.db import storable
from app.db.base import utcnow
from app.db.pgconn import DedicatedConnection, PgTarget


@dataclass(frozen=True, kw_only=True)
class NewRun:
    """A run in a new conversation, with the user's message (seq 1)."""

    run_id: uuid.UUID
    conversation_id: uuid.UUID
    agent_id: uuid.UUID
    title: str
    message: str
    api_key_id: uuid.UUID | None
    user: str | None
    worker_id: uuid.UUID
    event: tuple[str, dict[str, Any]] | None = None
    """The run's first journal event (seq 1: `run_started`, redacted), stored with it."""


@dataclass(frozen=True, kw_only=True)
class ContinuedRun:
    """A run in an existing conversation, with the user's message (after the last one)."""

    run_id: uuid.UUID
    conversation_id: uuid.UUID
    agent_id: uuid.UUID
    message: str
    api_key_id: uuid.UUID | None
    user: str | None
    admin: bool
    worker_id: uuid.UUID


# Who may continue a conversation is `Principal.sees` (app/tenancy/principal.py), in SQL: an
# admin key, or the key that created it, with its user unless it has none.
_CONTINUE = """
WITH r AS (
    INSERT INTO runs (id, conversation_id, agent_id, kind, status, iterations, usage, error,
                      cancel_requested, api_key_id, "user", finished_at, worker_id,
                      created_at, updated_at)
    SELECT $1, c.id, c.agent_id, 'chat', 'running', 0, '{}'::jsonb, NULL, false, $3,
           $4::varchar, NULL, $5, $6, $6
    FROM conversations c
    WHERE c.id = $2 AND c.agent_id = $7
      AND ($8 OR (c.api_key_id = $3 AND (c."user" IS NULL OR c."user" = $4::varchar)))
    RETURNING id
), u AS (
    INSERT INTO messages (id, conversation_id, run_id, seq, role, content, tool_calls,
                          tool_call_id, name, created_at)
    SELECT $9, $2, r.id,
           COALESCE((SELECT max(x.seq) FROM messages x WHERE x.conversation_id = $2), 0) + 1,
           'user', $10, NULL, NULL, NULL, $6
    FROM r
)
SELECT m.seq, m.role, m.content, m.tool_calls, m.tool_call_id, m.name
FROM r LEFT JOIN messages m ON m.conversation_id = $2
ORDER BY m.seq
"""
"""No row: nothing was inserted. Else the history before the new message (the statement's
snapshot does not see its own insert), one all-NULL row when there is none."""


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", "") or ""
        return state.startswith(("08", "57P"))
    return isinstance(exc, OSError | asyncpg.InterfaceError | ConnectionError)


async def _nothing_to_reset(_conn: asyncpg.Connection) -> None:
    """Released connections ran one autocommit statement and set nothing: skip the default
    reset query (a round trip per release); asyncpg still rolls back an open transaction."""


_STORED_BEFORE = frozenset({"pk_runs", "pk_conversations"})
"""Keys a retried start trips over when the attempt whose connection broke was committed."""


class _AlreadyStored(Exception):
    """A retried start found its run stored by the attempt whose connection broke."""


_START_MANY = """
WITH n AS (
    SELECT * FROM unnest($2::uuid[], $3::uuid[], $4::text[], $5::uuid[], $6::text[],
                         $7::uuid[], $8::uuid[], $9::uuid[], $10::text[], $11::text[],
                         $12::text[])
         AS n(conversation_id, agent_id, title, api_key_id, "user", run_id, worker_id,
              message_id, message, event_kind, event_data)
), e AS (
    INSERT INTO run_events (run_id, seq, kind, data, created_at)
    SELECT run_id, 1, event_kind, event_data::jsonb, $1 FROM n WHERE event_kind IS NOT NULL
), c AS (
    INSERT INTO conversations (id, agent_id, title, api_key_id, "user", created_at, updated_at)
    SELECT conversation_id, agent_id, title, api_key_id, "user", $1, $1 FROM n
    WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = n.agent_id)
), r AS (
    INSERT INTO runs (id, conversation_id, agent_id, kind, status, iterations, usage, error,
                      cancel_requested, api_key_id, "user", finished_at, worker_id,
                      created_at, updated_at)
    SELECT run_id, conversation_id, agent_id, 'chat', 'running', 0, '{}'::jsonb, NULL, false,
           api_key_id, "user", NULL, worker_id, $1, $1
    FROM n
)
INSERT INTO messages (id, conversation_id, run_id, seq, role, content, tool_calls,
                      tool_call_id, name, created_at)
SELECT message_id, conversation_id, run_id, 1, 'user', message, NULL, NULL, NULL, $1 FROM n
"""
"""The conversations, runs, user messages and first events of the new runs queued while the
previous statement ran (see `RunStarts`): one statement, atomic without a transaction block.
A run whose agent is gone (deleted behind a cached copy) gets no conversation, so its run row
fails the conversation's foreign key: the caller's 404."""
_MAX_STARTS = 500


@dataclass(frozen=True, slots=True)
class _Queued:
    """A run waiting for the next statement: its write's future and who is told at once."""

    new: NewRun
    done: asyncio.Future[None]
    then: Callable[[asyncio.Future[None]], None] | None

    def settle(self, failed: BaseException | None) -> None:
        if not self.done.done():
            if failed is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(failed)
        if self.then is not None:
            self.then(self.done)


class RunStarts:
    """Stores new runs through a small asyncpg pool (no pre-ping; retried on a dropped one).

    New runs are written like the journal: the ones that queue up while a statement runs go
    together in the next one (`unnest`), so a burst of starts costs a few round trips, not
    one each in line for a connection. When a batch is refused (an agent deleted meanwhile),
    each of its runs is tried alone, so only that run fails.
    """

    def __init__(self, dsn: str, *, size: int) -> None:
        self._dsn = dsn
        self._size = size
        self._pool: asyncpg.Pool | None = None
        self._queue: list[_Queued] = []
        self._drainer: asyncio.Task[None] | None = None
        self._writing = 0
        self._direct = DedicatedConnection(dsn)
        self._direct_busy = False

    @property
    def pending(self) -> int:
        """Starts queued or being written now."""
        return len(self._queue) + self._writing

    async def _get_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                str(self._dsn),
                **(self._dsn.connect_options if isinstance(self._dsn, PgTarget) else {}),
                min_size=0,
                max_size=self._size,
                max_inactive_connection_lifetime=60,
                reset=_nothing_to_reset,
            )
        return self._pool

    async def insert(self, new: NewRun) -> None:
        """Store the conversation, the run, the message and the first event (all or nothing)."""
        await self.submit(new)

    def submit(
        self, new: NewRun, *, then: Callable[[asyncio.Future[None]], None] | None = None
    ) -> asyncio.Future[None]:
        """Queue the run for the next statement at once (no task of its own): the future
        settles as storing it does. `then` is called with it as soon as it is settled, in the
        writer's own step: a done callback would run a loop turn later (tens of ms in a burst
        of starts, on the way to every run's first event)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(new, done, then))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="run-starts")
        return done

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:_MAX_STARTS], self._queue[_MAX_STARTS:]
            self._writing = len(batch)
            try:
                await self._insert_many([queued.new for queued in batch])
            except Exception as exc:
                if len(batch) == 1 or _is_disconnect(exc):
                    for queued in batch:
                        queued.settle(exc)
                    continue
                for queued in batch:  # one bad run must not fail the others
                    try:
                        await self._insert_one(queued.new)
                    except Exception as single:
                        queued.settle(single)
                    else:
                        queued.settle(None)
                continue
            for queued in batch:
                queued.settle(None)
        self._writing = 0

    async def _insert_many(self, batch: list[NewRun]) -> None:
        args = (
            utcnow(),
            [n.conversation_id for n in batch],
            [n.agent_id for n in batch],
            [n.title for n in batch],
            [n.api_key_id for n in batch],
            [n.user for n in batch],
            [n.run_id for n in batch],
            [n.worker_id for n in batch],
            [uuid.uuid4() for _ in batch],
            [n.message for n in batch],
            [n.event[0] if n.event else None for n in batch],
            [storable.json_or_none(n.event[1]) if n.event else None for n in batch],
        )
        try:
            await self._run(_START_MANY, args, fetch=False)
        except _AlreadyStored:
            return

    async def _insert_one(self, new: NewRun) -> None:
        await self._insert_many([new])

    async def _run(self, sql: str, args: tuple[Any, ...], *, fetch: bool) -> list[asyncpg.Record]:
        pool = await self._get_pool()
        # A start that meets connections the server dropped (a restart) tries the next ones.
        attempts = self._size + 1
        for attempt in range(1, attempts + 1):
            try:
                async with pool.acquire() as conn:
                    if fetch:
                        return list(await conn.fetch(sql, *storable.params(args)))
                    await conn.execute(sql, *storable.params(args))
                    return []
            except asyncpg.UniqueViolationError as exc:
                if attempt > 1 and exc.constraint_name in _STORED_BEFORE:
                    # The connection broke after the first attempt was committed.
                    raise _AlreadyStored from exc
                raise
            except Exception as exc:
                if attempt == attempts or not _is_disconnect(exc):
                    raise
        raise AssertionError("unreachable")

    async def continue_conversation(self, new: ContinuedRun) -> list[StoredMessage] | None:
        """Store the run and the message; the history before it, or None when nothing was
        stored (the caller finds out why on the session path)."""
        args = (
            new.run_id,
            new.conversation_id,
            new.api_key_id,
            new.user,
            new.worker_id,
            utcnow(),
            new.agent_id,
            new.admin,
            uuid.uuid4(),
            new.message,
        )
        try:
            rows = await self._run(_CONTINUE, args, fetch=True)
        except _AlreadyStored:
            return None  # stored, its reply lost: the session path sees a run in progress
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name == "uq_runs_running_conversation":
                return None  # a run in progress (or one whose worker died)
            raise
        if not rows:
            return None
        return [
            StoredMessage(
                seq=row["seq"],
                role=row["role"],
                content=row["content"],
                tool_calls=None if row["tool_calls"] is None else json.loads(row["tool_calls"]),
                tool_call_id=row["tool_call_id"],
                name=row["name"],
            )
            for row in rows
            if row["seq"] is not None
        ]

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """One autocommit statement of the run path (e.g. an MCP session's ownership check):
        on a connection of its own while no other such statement runs (a pool's acquire and
        release cost as much CPU as the statement), else on this pool, where it is tried
        again on the next connection when the server dropped one."""
        if not self._direct_busy:
            self._direct_busy = True
            try:
                return await self._direct.fetchrow(query, *args)
            except Exception as exc:
                if not _is_disconnect(exc):
                    raise
            finally:
                self._direct_busy = False
        pool = await self._get_pool()
        attempts = self._size + 1
        for attempt in range(1, attempts + 1):
            try:
                async with pool.acquire() as conn:
                    row: asyncpg.Record | None = await conn.fetchrow(query, *storable.params(args))
                    return row
            except Exception as exc:
                if attempt == attempts or not _is_disconnect(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        if self._drainer is not None:
            with contextlib.suppress(Exception):
                await self._drainer
        await self._direct.aclose()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


@dataclass(frozen=True, slots=True)
class _Deferred:
    """A new conversation's run, stored with its first event in the next batch."""

    starts: RunStarts
    new: NewRun

    @property
    def crowded(self) -> bool:
        return self.starts.pending > 0

    def store(self, first: FirstEvent | None, stored: asyncio.Future[None]) -> asyncio.Future[None]:
        new = replace(self.new, event=first)
        return self.starts.submit(new, then=partial(_settle, stored, self.new.agent_id))


def _settle(stored: asyncio.Future[None], agent_id: uuid.UUID, write: asyncio.Future[None]) -> None:
    """Settle `stored` as `write` was; a run whose agent is gone (deleted behind a cached copy:
    no conversation was inserted, the run fails its foreign key) is the caller's 404."""
    failed = None if write.cancelled() else write.exception()
    if isinstance(failed, asyncpg.ForeignKeyViolationError) and not stored.done():
        gone = agent_gone(agent_id)
        gone.__cause__ = failed
        stored.set_exception(gone)
        return
    copy_outcome(stored, write)


class PostgresRunStore:
    """`RunStartStore` on a Postgres store the app owns."""

    def __init__(self, dsn: str, *, session: SessionRunStore, size: int = 4) -> None:
        """`session`: the session store on the same database, for what one statement cannot
        decide (see `open`)."""
        self.starts = RunStarts(dsn, size=size)
        self.session = session

    async def open(self, start: RunStart) -> Opened:
        principal = start.principal
        if principal.rate_limit_per_minute is not None or start.history:
            # The key's run count is kept under its row lock in the session's transaction
            # (`count_run_start`); a client's history is stored with the run there too.
            return await self.session.open(start)
        worker_id = self.session.liveness.worker_id
        if start.conversation_id is None:
            new = NewRun(
                run_id=start.run_id,
                conversation_id=uuid.uuid4(),
                agent_id=start.agent_id,
                title=start.message[:80],
                message=start.message,
                api_key_id=principal.key_id,
                user=principal.user,
                worker_id=worker_id,
            )
            return Opened(new.conversation_id, [], _Deferred(self.starts, new))
        stored = await self.starts.continue_conversation(
            ContinuedRun(
                run_id=start.run_id,
                conversation_id=start.conversation_id,
                agent_id=start.agent_id,
                message=start.message,
                api_key_id=principal.key_id,
                user=principal.user,
                admin=principal.admin,
                worker_id=worker_id,
            )
        )
        if stored is None:
            # Nothing stored: the session store finds out why (404, another agent's, 409), or
            # closes a run whose worker died and stores this one.
            return await self.session.open(start)
        return Opened(start.conversation_id, history_from_rows(stored))

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """One autocommit statement of the run path (e.g. an MCP session's ownership check):
        `RunStarts.fetchrow`."""
        return await self.starts.fetchrow(query, *args)

    async def aclose(self) -> None:
        await self.starts.aclose()
        await self.session.aclose()
