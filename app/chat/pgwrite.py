"""The journal's writes on Postgres: one statement per batch, on a plain asyncpg connection.

A journal batch — the events of every run that queued meanwhile, the final state of the runs
that ended, the audit rows that go with them, and one `NOTIFY` per run — is one statement, its
rows passed as arrays (`unnest`). It goes neither through the ORM nor through the SQLAlchemy pool
(and so pays no pre-ping): the journal keeps one dedicated connection and retries through its
own back-off (`app/chat/journal.py`).

Runs are stored as they start by the run start store (`app/chat/run_store_pg.py`, the same
way: one statement, its own asyncpg pool). Both stores (SQLite, and apps given a sessionmaker
by tests) write the same through sessions instead.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.audit.record import AuditRow
from app.audit.sink import insert_tool_calls_sql, tool_call_arrays
from app.db import storable
from app.db.base import utcnow
from app.db.pgconn import DedicatedConnection


def asyncpg_dsn(async_url: str) -> str:
    return async_url.replace("postgresql+asyncpg://", "postgresql://", 1)


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

_EVENTS_AUDIT = f"""
WITH ev AS (
    INSERT INTO run_events (run_id, seq, kind, data, created_at)
    SELECT e.run_id, e.seq, e.kind, e.data::jsonb, $1
    FROM unnest($2::uuid[], $3::int[], $4::text[], $5::text[]) AS e(run_id, seq, kind, data)
), tc AS (
{insert_tool_calls_sql(8)}
)
SELECT pg_notify($6, n) FROM unnest($7::text[]) AS n
"""
"""Events with the audit rows that go with them and no run ends (an MCP endpoint call:
`tool_call`, `tool_result` and its audit row): `_BATCH` without its empty parts, 21 parameters
instead of 34."""


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
    audit: Sequence[AuditRow] = (),
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
        audit: Sequence[AuditRow] = (),
    ) -> None:
        """One batch in one statement: events, final states, audit rows that go with them,
        one `NOTIFY` per run."""
        if not settles:
            if not audit:
                await self._conn.execute(_EVENTS, *events_args(events, channel))
                return
            args = (*events_args(events, channel), *tool_call_arrays(audit))
            await self._conn.execute(_EVENTS_AUDIT, *args)
            return
        await self._conn.execute(_BATCH, *batch_args(events, settles, channel, audit))

    async def aclose(self) -> None:
        await self._conn.aclose()
