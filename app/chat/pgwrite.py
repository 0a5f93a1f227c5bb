"""The run path's writes on Postgres: one statement each, on plain asyncpg connections.

Starting a run in a new conversation stores the conversation, the run and the user's message
in one statement (data-modifying CTEs; atomic without a transaction block, so one round trip).
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

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg

from app.audit.models import ToolCall
from app.audit.sink import tool_call_arrays
from app.db.base import utcnow
from app.db.pgconn import DedicatedConnection


def asyncpg_dsn(async_url: str) -> str:
    return async_url.replace("postgresql+asyncpg://", "postgresql://", 1)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


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


_START = """
WITH c AS (
    INSERT INTO conversations (id, agent_id, title, api_key_id, "user", created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $6)
), r AS (
    INSERT INTO runs (id, conversation_id, agent_id, kind, status, iterations, usage, error,
                      cancel_requested, api_key_id, "user", finished_at, worker_id,
                      created_at, updated_at)
    VALUES ($7, $1, $2, 'chat', 'running', 0, '{}'::jsonb, NULL, false, $4, $5, NULL, $8,
            $6, $6)
)
INSERT INTO messages (id, conversation_id, run_id, seq, role, content, tool_calls,
                      tool_call_id, name, created_at)
VALUES ($9, $1, $7, 1, 'user', $10, NULL, NULL, NULL, $6)
"""


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", "") or ""
        return state.startswith(("08", "57P"))
    return isinstance(exc, OSError | asyncpg.InterfaceError | ConnectionError)


async def _nothing_to_reset(_conn: asyncpg.Connection) -> None:
    """Released connections ran one autocommit statement and set nothing: skip the default
    reset query (a round trip per release); asyncpg still rolls back an open transaction."""


class RunStarts:
    """Stores new runs through a small asyncpg pool (no pre-ping; retried on a dropped one)."""

    def __init__(self, dsn: str, *, size: int) -> None:
        self._dsn = dsn
        self._size = size
        self._pool: asyncpg.Pool | None = None

    async def _get_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=self._size,
                max_inactive_connection_lifetime=60,
                reset=_nothing_to_reset,
            )
        return self._pool

    async def insert(self, new: NewRun) -> None:
        """Store the conversation, the run and the message (all or nothing)."""
        args = (
            new.conversation_id,
            new.agent_id,
            new.title,
            new.api_key_id,
            new.user,
            utcnow(),
            new.run_id,
            new.worker_id,
            uuid.uuid4(),
            new.message,
        )
        pool = await self._get_pool()
        # A start that meets connections the server dropped (a restart) tries the next ones.
        attempts = self._size + 1
        for attempt in range(1, attempts + 1):
            try:
                async with pool.acquire() as conn:
                    await conn.execute(_START, *args)
                return
            except asyncpg.UniqueViolationError as exc:
                if attempt > 1 and exc.constraint_name == "pk_runs":
                    return  # the connection broke after the first attempt was committed
                raise
            except Exception as exc:
                if attempt == attempts or not _is_disconnect(exc):
                    raise

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        """One autocommit statement of the run path on this pool (e.g. an MCP session's
        ownership check), tried again on the next connection when the server dropped one."""
        pool = await self._get_pool()
        attempts = self._size + 1
        for attempt in range(1, attempts + 1):
            try:
                async with pool.acquire() as conn:
                    row: asyncpg.Record | None = await conn.fetchrow(query, *args)
                    return row
            except Exception as exc:
                if attempt == attempts or not _is_disconnect(exc):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
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


_BATCH = """
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
    INSERT INTO tool_calls (id, run_id, api_key_id, "user", agent_id, kind, name, target,
                            arguments, ok, error, latency_ms, created_at)
    SELECT t.id, t.run_id, t.api_key_id, t.u, t.agent_id, t.kind, t.name, t.target,
           t.arguments::jsonb, t.ok, t.error, t.latency_ms, t.created_at
    FROM unnest($21::uuid[], $22::uuid[], $23::uuid[], $24::text[], $25::uuid[], $26::text[],
                $27::text[], $28::text[], $29::text[], $30::bool[], $31::text[], $32::float8[],
                $33::timestamptz[])
         AS t(id, run_id, api_key_id, u, agent_id, kind, name, target, arguments, ok, error,
              latency_ms, created_at)
    ON CONFLICT (id) DO NOTHING
)
SELECT pg_notify($19, n) FROM unnest($20::text[]) AS n
"""


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
        [json.dumps(e[3], separators=(",", ":")) for e in events],
        [c for c, _, _, _ in msgs],
        [r for _, r, _, _ in msgs],
        [i for _, _, i, _ in msgs],
        [m["role"] for *_, m in msgs],
        [m.get("content") for *_, m in msgs],
        [_json(m.get("tool_calls")) for *_, m in msgs],
        [m.get("tool_call_id") for *_, m in msgs],
        [m.get("name") for *_, m in msgs],
        [s.run_id for s in settles],
        [s.status for s in settles],
        [s.iterations for s in settles],
        [json.dumps(s.usage, separators=(",", ":")) for s in settles],
        [_json(s.error) for s in settles],
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
        await self._conn.execute(_BATCH, *batch_args(events, settles, channel, audit))

    async def aclose(self) -> None:
        await self._conn.aclose()
