"""Writes tool-call audit rows off the call path, in small batches (see `BatchSink`).

On a Postgres store the app owns, a batch is one multi-row `INSERT` (`unnest`) on a dedicated
asyncpg connection: no ORM unit of work, no pool checkout and pre-ping per batch (each tool
call of a quiet session is a batch of its own). Other stores go through a session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.record import AuditRow
from app.db import storable
from app.db.batch_sink import BatchSink
from app.db.pgconn import DedicatedConnection


class ToolAuditBackend(Protocol):
    """What a run's tool phase calls to audit a call (implemented by `ToolCallSink`)."""

    def record(self, row: AuditRow) -> None: ...


def insert_tool_calls_sql(first: int) -> str:
    """`INSERT … SELECT … FROM unnest(…)` of tool-call rows, its 14 array parameters numbered
    from `$first` in `tool_call_arrays`' order (alone here; a CTE of the journal's batch).

    `ON CONFLICT`: a batch sent again after its connection dropped mid-answer is stored once.
    """
    types = ("uuid", "uuid", "uuid", "text", "uuid", "text", "text", "text", "text", "bool",
             "text", "float8", "timestamptz", "text")  # fmt: skip
    arrays = ", ".join(f"${first + i}::{t}[]" for i, t in enumerate(types))
    return f"""
INSERT INTO tool_calls (id, run_id, api_key_id, "user", agent_id, kind, name, target,
                        arguments, ok, error, latency_ms, created_at, call_id)
SELECT t.id, t.run_id, t.api_key_id, t.u, t.agent_id, t.kind, t.name, t.target,
       t.arguments::jsonb, t.ok, t.error, t.latency_ms, t.created_at, t.call_id
FROM unnest({arrays})
     AS t(id, run_id, api_key_id, u, agent_id, kind, name, target, arguments, ok, error,
          latency_ms, created_at, call_id)
ON CONFLICT (id) DO NOTHING
"""


_INSERT = insert_tool_calls_sql(1)


def tool_call_values(batch: Sequence[AuditRow]) -> list[dict[str, Any]]:
    """The rows as column values for a Core INSERT (the SQLite journal writer's audit rows)."""
    return [row.values() for row in batch]


def tool_call_arrays(batch: Sequence[AuditRow]) -> tuple[Any, ...]:
    """The rows as 14 arrays, in the order of `_INSERT`'s `unnest` (also used by the journal
    batch, which stores an MCP session's audit rows with its events)."""
    return (
        [r.with_id().id for r in batch],
        [r.run_id for r in batch],
        [r.api_key_id for r in batch],
        [r.user for r in batch],
        [r.agent_id for r in batch],
        [r.kind for r in batch],
        [r.name for r in batch],
        [r.target for r in batch],
        [storable.json_text(r.arguments) for r in batch],
        [r.ok for r in batch],
        [r.error for r in batch],
        [r.latency_ms for r in batch],
        [r.created_at for r in batch],
        [r.call_id for r in batch],
    )


class ToolCallSink(BatchSink[AuditRow]):
    label = "tool-call audit"

    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], *, dsn: str | None = None
    ) -> None:
        """`dsn`: the app's own Postgres store (asyncpg form); None: through sessions."""
        super().__init__(sessionmaker)
        self._fast = DedicatedConnection(dsn) if dsn else None

    async def store(self, batch: list[AuditRow]) -> None:
        if self._fast is None:
            await self.insert([row.to_orm() for row in batch])
            return
        args = tool_call_arrays(batch)
        try:
            await self._fast.execute(_INSERT, *args)
        except (OSError, asyncpg.InterfaceError, ConnectionError):
            # The connection had dropped (a restart of the server): once more, on a new one.
            await self._fast.execute(_INSERT, *args)

    async def aclose(self) -> None:
        await super().aclose()
        if self._fast is not None:
            await self._fast.aclose()
