"""The run path's writes on Postgres: one statement each, on plain asyncpg connections.

Starting runs in new conversations stores the conversations, the runs, the users' messages and
each run's first event (`run_started`) in one statement (data-modifying CTEs over `unnest`
arrays; atomic without a transaction block, so one round trip for every start queued meanwhile).
Continuing a conversation is one statement too: the run and the user's message are inserted
only when the conversation is the caller's and the agent's, and the same statement returns the
history before that message. When it inserts nothing (unknown conversation, someone else's,
another agent's, a run still in progress: the unique index on running runs refuses it), the
caller takes the session path, which tells those cases apart (and closes a run whose worker
died instead of answering 409).
A journal batch — the events of every run that queued meanwhile, the final state of the runs
that ended, and one `NOTIFY` per run — is one statement too, its rows passed as arrays
(`unnest`). Neither goes through the ORM or the SQLAlchemy pool (and so pays no pre-ping):
the start uses a small asyncpg pool of its own and retries on the next connection when the
server dropped one; the journal keeps one dedicated connection and retries through the
journal's own back-off (`app/chat/journal.py`).

Both stores (SQLite, and apps given a sessionmaker by tests) take the session path in
`app/chat/repository.py` instead; this module is the Postgres fast path of the same writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from app.audit.models import ToolCall
from app.audit.sink import insert_tool_calls_sql, tool_call_arrays
from app.db import storable
from app.db.base import utcnow
from app.db.pgconn import DedicatedConnection, PgTarget


def asyncpg_dsn(async_url: str) -> str:
    return async_url.replace("postgresql+asyncpg://", "postgresql://", 1)


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


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A conversation's message as the run path reads it (the columns `Message` has)."""

    seq: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None


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
        self._queue: list[tuple[NewRun, asyncio.Future[None]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._writing = 0

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

    def submit(self, new: NewRun) -> asyncio.Future[None]:
        """Queue the run for the next statement at once (no task of its own): the future
        settles as storing it does."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((new, done))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.create_task(self._drain(), name="run-starts")
        return done

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[:_MAX_STARTS], self._queue[_MAX_STARTS:]
            self._writing = len(batch)
            try:
                await self._insert_many([new for new, _ in batch])
            except Exception as exc:
                if len(batch) == 1 or _is_disconnect(exc):
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for new, done in batch:  # one bad run must not fail the others
                    try:
                        await self._insert_one(new)
                    except Exception as single:
                        if not done.done():
                            done.set_exception(single)
                    else:
                        if not done.done():
                            done.set_result(None)
                continue
            for _, done in batch:
                if not done.done():
                    done.set_result(None)
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
        """One autocommit statement of the run path on this pool (e.g. an MCP session's
        ownership check), tried again on the next connection when the server dropped one."""
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
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


@dataclass(frozen=True, kw_only=True)
class Settle:
    """A run's final state, stored with its last event (see `JournalWriter.write`)."""

    run_id: uuid.UUID
    status: str
    iterations: int
    usage: dict[str, Any]
    error: dict[str, Any] | None = None
    conversation_id: uuid.UUID | None = None
    messages: Sequence[dict[str, Any]] = field(default_factory=tuple)
    """The conversation's new messages (`message_row` shape), appended after its last one."""


_BATCH = f"""
WITH ev AS (
    INSERT INTO run_events (run_id, seq, kind, data, created_at)
    SELECT e.run_id, e.seq, e.kind, e.data::jsonb, $1
    FROM unnest($2::uuid[], $3::int[], $4::text[], $5::text[]) AS e(run_id, seq, kind, data)
), msg AS (
    INSERT INTO messages (id, conversation_id, run_id, seq, role, content, tool_calls,
                          tool_call_id, name, created_at)
    SELECT gen_random_uuid(), m.conversation_id, m.run_id,
           COALESCE((SELECT max(x.seq) FROM messages x
                     WHERE x.conversation_id = m.conversation_id), 0) + m.ord,
           m.role, m.content, m.tool_calls::jsonb, m.tool_call_id, m.name, $1
    FROM unnest($6::uuid[], $7::uuid[], $8::int[], $9::text[], $10::text[], $11::text[],
                $12::text[], $13::text[])
         AS m(conversation_id, run_id, ord, role, content, tool_calls, tool_call_id, name)
), fin AS (
    UPDATE runs SET status = f.status, iterations = f.iterations, usage = f.usage::jsonb,
                    error = f.error::jsonb, finished_at = $1, updated_at = $1
    FROM unnest($14::uuid[], $15::text[], $16::int[], $17::text[], $18::text[])
         AS f(id, status, iterations, usage, error)
    WHERE runs.id = f.id
), tc AS (
{insert_tool_calls_sql(21)}
)
SELECT pg_notify($19, n) FROM unnest($20::text[]) AS n
"""

_EVENTS = """
WITH ev AS (
    INSERT INTO run_events (run_id, seq, kind, data, created_at)
    SELECT e.run_id, e.seq, e.kind, e.data::jsonb, $1
    FROM unnest($2::uuid[], $3::int[], $4::text[], $5::text[]) AS e(run_id, seq, kind, data)
)
SELECT pg_notify($6, n) FROM unnest($7::text[]) AS n
"""
"""A batch of events only (no run ends, no audit rows; most batches: model deltas): `_BATCH`
without its empty parts, half its time on the server (~0.4 vs ~0.75 ms for one event)."""


def events_args(
    events: Sequence[tuple[uuid.UUID, int, str, dict[str, Any]]], channel: str
) -> tuple[Any, ...]:
    runs = list(dict.fromkeys(e[0] for e in events)) if channel else []
    return (
        utcnow(),
        [e[0] for e in events],
        [e[1] for e in events],
        [e[2] for e in events],
        [storable.json_text(e[3]) for e in events],
        channel,
        [str(r) for r in runs],
    )


def batch_args(
    events: Sequence[tuple[uuid.UUID, int, str, dict[str, Any]]],
    settles: Sequence[Settle],
    channel: str,
    audit: Sequence[ToolCall] = (),
) -> tuple[Any, ...]:
    msgs = [
        (s.conversation_id, s.run_id, i, m)
        for s in settles
        if s.conversation_id is not None
        for i, m in enumerate(s.messages, start=1)
    ]
    runs = list(dict.fromkeys(e[0] for e in events)) if channel else []
    now: datetime = utcnow()
    return (
        now,
        [e[0] for e in events],
        [e[1] for e in events],
        [e[2] for e in events],
        [storable.json_text(e[3]) for e in events],
        [c for c, _, _, _ in msgs],
        [r for _, r, _, _ in msgs],
        [i for _, _, i, _ in msgs],
        [m["role"] for *_, m in msgs],
        [m.get("content") for *_, m in msgs],
        [storable.json_or_none(m.get("tool_calls")) for *_, m in msgs],
        [m.get("tool_call_id") for *_, m in msgs],
        [m.get("name") for *_, m in msgs],
        [s.run_id for s in settles],
        [s.status for s in settles],
        [s.iterations for s in settles],
        [storable.json_text(s.usage) for s in settles],
        [storable.json_or_none(s.error) for s in settles],
        channel,
        [str(r) for r in runs],
        *tool_call_arrays(audit),
    )


class JournalConnection:
    """The journal's dedicated connection (opened on first use, again after it broke)."""

    def __init__(self, dsn: str) -> None:
        self._conn = DedicatedConnection(dsn)

    async def write(
        self,
        events: Sequence[tuple[uuid.UUID, int, str, dict[str, Any]]],
        settles: Sequence[Settle],
        channel: str,
        audit: Sequence[ToolCall] = (),
    ) -> None:
        """One batch in one statement: events, final states, audit rows that go with them,
        one `NOTIFY` per run."""
        if not settles and not audit:
            await self._conn.execute(_EVENTS, *events_args(events, channel))
            return
        await self._conn.execute(_BATCH, *batch_args(events, settles, channel, audit))

    async def aclose(self) -> None:
        await self._conn.aclose()
