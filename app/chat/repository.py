"""The journal and conversation store: runs, their ordered events, and messages."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any, cast

from sqlalchemy import Table, delete, exists, func, insert, literal, select, text, update
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.audit.models import ToolCall
from app.chat.models import Conversation, Message, Run, RunEventRecord, Worker
from app.db import storable
from app.db.base import Base, utcnow
from app.kit.repository import RepositoryBase

RUNNING = "running"


def _table(model: type[Base]) -> Table:
    """A model's table, for Core statements (no ORM unit of work on the run path)."""
    return cast(Table, model.__table__)


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; everything is stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class RunRepository(RepositoryBase[Run]):
    model = Run

    async def running_in_conversation(self, conversation_id: uuid.UUID) -> Run | None:
        stmt = select(Run).where(
            Run.conversation_id == conversation_id,
            Run.status == RUNNING,
            Run.parent_run_id.is_(None),
        )
        return (await self.session.execute(stmt.limit(1))).scalar_one_or_none()

    async def running_descendants(self, run_id: uuid.UUID, *, depth: int) -> list[uuid.UUID]:
        """Ids of the running child runs below `run_id` (delegations), `depth` levels deep."""
        found: list[uuid.UUID] = []
        level = [run_id]
        for _ in range(depth):
            stmt = select(Run.id).where(Run.parent_run_id.in_(level), Run.status == RUNNING)
            level = list((await self.session.execute(stmt)).scalars())
            if not level:
                break
            found += level
        return found

    async def events_after(self, run_id: uuid.UUID, seq: int) -> list[RunEventRecord]:
        stmt = (
            select(RunEventRecord)
            .where(RunEventRecord.run_id == run_id, RunEventRecord.seq > seq)
            .order_by(RunEventRecord.seq)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def append_event(
        self, run_id: uuid.UUID, seq: int, kind: str, data: dict[str, Any]
    ) -> None:
        self.session.add(RunEventRecord(run_id=run_id, seq=seq, kind=kind, data=data))
        await self.session.flush()

    async def finish(
        self,
        run_id: uuid.UUID,
        *,
        status: str,
        iterations: int,
        usage: dict[str, Any],
        error: dict[str, Any] | None = None,
    ) -> None:
        await self.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                status=status,
                iterations=iterations,
                usage=usage,
                error=error,
                finished_at=utcnow(),
                updated_at=utcnow(),
            )
        )

    async def last_activity(self, run: Run) -> datetime:
        """When the run last journaled an event (its start when it has none)."""
        stmt = select(func.max(RunEventRecord.created_at)).where(RunEventRecord.run_id == run.id)
        latest = await self.session.scalar(stmt)
        return _aware(latest or run.created_at)

    async def close_lost(self, run_id: uuid.UUID, kind: str, data: dict[str, Any]) -> int | None:
        """End a run nobody executes any more with one final event after its last one.

        Returns the event's seq, or None when the run was no longer running (closed by
        someone else meanwhile: the guarded UPDATE makes concurrent closers safe)."""
        error = data.get("error")
        closed = await self.session.execute(
            update(Run)
            .where(Run.id == run_id, Run.status == RUNNING)
            .values(status="failed", error=error, finished_at=utcnow(), updated_at=utcnow())
        )
        if getattr(closed, "rowcount", 0) != 1:
            return None
        stmt = select(func.max(RunEventRecord.seq)).where(RunEventRecord.run_id == run_id)
        seq = int(await self.session.scalar(stmt) or 0) + 1
        await self.append_event(run_id, seq, kind, data)
        return seq

    async def orphaned(
        self, *, me: uuid.UUID, lost_before: datetime, only_worker_alive: bool
    ) -> list[Run]:
        """Running runs of other workers that are dead (no heartbeat since `lost_before`, or
        no worker at all). With `only_worker_alive` (a single-process store) every other
        worker counts as dead."""
        stmt = select(Run).where(Run.status == RUNNING)
        if only_worker_alive:
            stmt = stmt.where((Run.worker_id != me) | Run.worker_id.is_(None))
        else:
            alive = exists().where(Worker.id == Run.worker_id, Worker.heartbeat_at >= lost_before)
            stmt = stmt.where(~alive)
        return list((await self.session.execute(stmt)).scalars().all())

    async def running_of_worker(self, worker_id: uuid.UUID) -> list[Run]:
        stmt = select(Run).where(Run.status == RUNNING, Run.worker_id == worker_id)
        return list((await self.session.execute(stmt)).scalars().all())

    async def request_cancel(self, run_id: uuid.UUID) -> None:
        await self.session.execute(
            update(Run).where(Run.id == run_id).values(cancel_requested=True)
        )

    async def insert(self, **values: Any) -> None:
        """A new run (Core INSERT: the columns' defaults fill in the rest)."""
        await self.session.execute(insert(_table(Run)).values(**values))

    async def runs_of(self, conversation_id: uuid.UUID) -> list[Run]:
        stmt = select(Run).where(Run.conversation_id == conversation_id).order_by(Run.created_at)
        return list((await self.session.execute(stmt)).scalars().all())


class ConversationRepository(RepositoryBase[Conversation]):
    model = Conversation

    async def lock(self, conversation_id: uuid.UUID) -> Conversation | None:
        """The conversation, locked until the transaction ends (orders concurrent starts)."""
        stmt = select(Conversation).where(Conversation.id == conversation_id).with_for_update()
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def insert_for_agent(self, **values: Any) -> bool:
        """A new conversation when its agent (`values["agent_id"]`) exists (there is no
        foreign key: history outlives the agent): was it stored?"""
        table = _table(Conversation)
        values.setdefault("created_at", utcnow())
        values.setdefault("updated_at", values["created_at"])
        row = select(*(literal(v, table.c[k].type).label(k) for k, v in values.items())).where(
            exists().where(_table(Agent).c.id == values["agent_id"])
        )
        result = await self.session.execute(insert(table).from_select(list(values), row))
        return bool(getattr(result, "rowcount", 0))

    async def insert_messages(
        self,
        conversation_id: uuid.UUID,
        run_id: uuid.UUID,
        first_seq: int,
        messages: Sequence[dict[str, Any]],
    ) -> None:
        """Messages numbered from `first_seq` (the caller knows the conversation's last)."""
        rows = [
            {"conversation_id": conversation_id, "run_id": run_id, "seq": first_seq + i, **msg}
            for i, msg in enumerate(messages)
        ]
        await self.session.execute(insert(_table(Message)), rows)

    async def messages(self, conversation_id: uuid.UUID) -> list[Message]:
        stmt = (
            select(Message).where(Message.conversation_id == conversation_id).order_by(Message.seq)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def next_message_seq(self, conversation_id: uuid.UUID) -> int:
        stmt = select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)
        current = await self.session.scalar(stmt)
        return int(current or 0) + 1

    async def add_messages(
        self, conversation_id: uuid.UUID, run_id: uuid.UUID, messages: Sequence[dict[str, Any]]
    ) -> None:
        if not messages:
            return
        seq = await self.next_message_seq(conversation_id)
        rows = [
            {"conversation_id": conversation_id, "run_id": run_id, "seq": seq + offset, **msg}
            for offset, msg in enumerate(messages)
        ]
        await self.session.execute(insert(_table(Message)), rows)


class WorkerRepository:
    """Heartbeats of the gateway processes that execute runs."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def beat(self, worker_id: uuid.UUID, *, host: str, pid: int) -> None:
        """Record that the worker is alive (registering it on its first beat)."""
        now = utcnow()
        updated = await self.session.execute(
            update(Worker).where(Worker.id == worker_id).values(heartbeat_at=now)
        )
        if getattr(updated, "rowcount", 0) == 0:
            await self.session.execute(
                insert(Worker).values(
                    id=worker_id, host=host, pid=pid, started_at=now, heartbeat_at=now
                )
            )

    async def alive(self, worker_id: uuid.UUID, *, lost_before: datetime) -> bool:
        stmt = select(Worker.heartbeat_at).where(Worker.id == worker_id)
        beat = await self.session.scalar(stmt)
        return beat is not None and _aware(beat) >= lost_before

    async def forget_dead(self, *, lost_before: datetime) -> None:
        await self.session.execute(delete(Worker).where(Worker.heartbeat_at < lost_before))

    async def forget(self, worker_id: uuid.UUID) -> None:
        await self.session.execute(delete(Worker).where(Worker.id == worker_id))


class JournalRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def present(
        self, run_ids: set[uuid.UUID], seqs: set[int]
    ) -> set[tuple[uuid.UUID, int, str]]:
        """(run_id, seq, kind) of the stored events among these runs and numbers."""
        stmt = select(RunEventRecord.run_id, RunEventRecord.seq, RunEventRecord.kind).where(
            RunEventRecord.run_id.in_(run_ids), RunEventRecord.seq.in_(seqs)
        )
        return {(r, s, k) for r, s, k in (await self.session.execute(stmt)).all()}

    async def insert(self, rows: list[dict[str, Any]]) -> None:
        """A batch of events in one statement (`run_id`, `seq`, `kind`, `data` each)."""
        await self.session.execute(insert(_table(RunEventRecord)), rows)


class RawBatch:
    """A journal batch on a DBAPI connection of the SQLite store (the journal writer's,
    `app/chat/sqlitewrite.py`): the events as `JournalRepository.insert` stores them and the
    audit rows that go with them (`tool_call_values`), as INSERTs compiled once by the
    engine's dialect, each value through its column type's own bind processor (UTC times,
    JSON without NUL, UUIDs) and the engine's NUL-free parameters (`storable.params`), with no
    statement, cache-key or event machinery per batch. The caller commits.
    `tests/storage/test_tool_audit_sink.py` checks it stores what the session path stores."""

    def __init__(self, dialect: Dialect) -> None:
        events = ("run_id", "seq", "kind", "data", "created_at")
        self._events = _RawInsert(_table(RunEventRecord), dialect, events)
        audit = tuple(c.key for c in _table(ToolCall).columns)
        self._audit = _RawInsert(_table(ToolCall), dialect, audit)

    def store(self, dbapi: Any, rows: list[dict[str, Any]], audit: list[dict[str, Any]]) -> None:
        cursor = dbapi.cursor()
        try:
            self._events.run(cursor, rows)
            if audit:
                self._audit.run(cursor, audit)
        finally:
            cursor.close()


class _RawInsert:
    def __init__(self, table: Table, dialect: Dialect, keys: Sequence[str]) -> None:
        compiled = insert(table).compile(dialect=dialect, column_keys=list(keys))
        self.sql = str(compiled)
        order = list(compiled.positiontup or ())
        columns = {c.key: c for c in table.columns}
        self.keys = order
        self.processors = [
            columns[k].type.dialect_impl(dialect).bind_processor(dialect) for k in order
        ]
        self.defaults: dict[str, Any] = {}
        """Python-side defaults of columns a row may leave out (`created_at`): callables."""
        for key in order:
            default: Any = columns[key].default
            if default is not None and default.is_callable:
                self.defaults[key] = default.arg
            elif default is not None and default.is_scalar:
                self.defaults[key] = partial(_same, default.arg)

    def run(self, cursor: Any, rows: list[dict[str, Any]]) -> None:
        params = []
        for row in rows:
            values = []
            for key, process in zip(self.keys, self.processors, strict=True):
                if key in row:
                    value = row[key]
                elif key in self.defaults:
                    value = self.defaults[key](None)  # SQLAlchemy's (context) signature
                else:
                    value = None
                values.append(value if process is None else process(value))
            params.append(tuple(values))
        # Processed values are scalars: one flat scan for NUL (`storable.params` when found).
        if any(type(v) is str and "\x00" in v for row in params for v in row):
            params = storable.params(params)
        cursor.executemany(self.sql, params)


def _same(value: Any, _context: Any) -> Any:
    return value


class ChannelRepository:
    """`NOTIFY` on a Postgres channel, sent when the caller's transaction commits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def notify(self, channel: str, payload: str) -> None:
        await self.session.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel, "p": payload})
