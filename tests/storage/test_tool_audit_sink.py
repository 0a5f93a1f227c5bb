"""The tool-call audit sink writes the same rows through asyncpg as through the ORM."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit import record
from app.audit.models import ToolCall
from app.audit.record import AuditRow, tool_call_row
from app.audit.sink import ToolCallSink
from app.chat.pgwrite import asyncpg_dsn
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import upgrade
from app.tools.base import CallContext, ToolResult

COLUMNS = (
    "run_id",
    "call_id",
    "api_key_id",
    "user",
    "agent_id",
    "kind",
    "name",
    "target",
    "arguments",
    "ok",
    "error",
    "latency_ms",
)


def _rows(run_id: uuid.UUID) -> list[AuditRow]:
    ctx = CallContext(run_id=str(run_id), agent_id=str(uuid.uuid4()), user="ann")
    ok = tool_call_row(
        call_id="call_1",
        name="mcp",
        arguments={"n": [1, {"a": None}]},
        tool=None,
        step="mcp:clock/get_current_time",
        result=ToolResult.success("12:00"),
        ctx=ctx,
        latency_ms=1.23456,
    )
    failed = tool_call_row(
        call_id=None,
        name="database",
        arguments="not json",
        tool=None,
        step=None,
        result=ToolResult.fail("no such table"),
        ctx=CallContext(run_id=str(run_id)),
        latency_ms=0.5,
    )
    return [ok, failed]


async def test_the_asyncpg_path_stores_what_the_orm_path_stores(
    committing_settings: Settings,
) -> None:
    engine = create_engine(committing_settings)
    maker = create_sessionmaker(engine)
    fast_run, orm_run = uuid.uuid4(), uuid.uuid4()
    fast = ToolCallSink(maker, dsn=asyncpg_dsn(committing_settings.async_database_url))
    orm = ToolCallSink(maker)
    try:
        for row in _rows(fast_run):
            fast.record(row)
        for row in _rows(orm_run):
            orm.record(row)
        await fast.aclose()
        await orm.aclose()
        assert (fast.written, fast.failed, orm.written, orm.failed) == (2, 0, 2, 0)

        async def stored(run_id: uuid.UUID) -> list[dict[str, Any]]:
            async with maker() as session:
                rows = (
                    await session.scalars(
                        select(ToolCall).where(ToolCall.run_id == run_id).order_by(ToolCall.name)
                    )
                ).all()
            assert all(r.id is not None and r.created_at is not None for r in rows)
            return [
                {c: getattr(r, c) for c in COLUMNS if c not in ("run_id", "agent_id")} for r in rows
            ]

        by_fast, by_orm = await stored(fast_run), await stored(orm_run)
        assert len(by_fast) == 2
        assert [r["call_id"] for r in by_fast] == [None, "call_1"]  # database, mcp
        assert by_fast == by_orm
    finally:
        await engine.dispose()


async def two_session_runs(maker: async_sessionmaker[AsyncSession]) -> list[uuid.UUID]:
    """Two MCP-session runs of a new agent, committed: one per write path under test."""
    from app.agents.models import Agent
    from app.chat.models import Conversation, Run

    async with maker() as session:
        agent = Agent(name=f"audited-{uuid.uuid4().hex[:8]}")
        session.add(agent)
        await session.flush()
        runs = []
        for _ in range(2):
            conversation = Conversation(agent_id=agent.id, title="t")
            session.add(conversation)
            await session.flush()
            run = Run(conversation_id=conversation.id, agent_id=agent.id, kind="mcp_session")
            session.add(run)
            await session.flush()
            runs.append(run.id)
        await session.commit()
    return runs


async def test_audit_rows_go_with_journal_events_on_both_write_paths(
    committing_settings: Settings,
) -> None:
    """An MCP session's audit rows ride the journal write of its events: through asyncpg
    (Postgres the app owns) and through a session (other stores) alike."""
    from app.chat.hub import RunHub
    from app.chat.journal import JournalBatcher
    from app.chat.models import RunEventRecord

    engine = create_engine(committing_settings)
    maker = create_sessionmaker(engine)
    dsn = asyncpg_dsn(committing_settings.async_database_url)
    try:
        runs = await two_session_runs(maker)
        for run_id, fast in zip(runs, (dsn, None), strict=True):
            batcher = JournalBatcher(sessionmaker=maker, hub=RunHub(), dsn=fast)
            rows = _rows(run_id)
            await batcher.enqueue(run_id, 1, "tool_call", {"name": "mcp"}, None)
            await batcher.enqueue(run_id, 2, "tool_result", {"ok": True}, None, rows)
            await batcher.aclose()
            if batcher._fast is not None:
                await batcher._fast.aclose()
        stored = []
        for run_id in runs:
            async with maker() as session:
                kinds = (
                    await session.scalars(
                        select(RunEventRecord.kind).where(RunEventRecord.run_id == run_id)
                    )
                ).all()
                calls = (
                    await session.scalars(
                        select(ToolCall).where(ToolCall.run_id == run_id).order_by(ToolCall.name)
                    )
                ).all()
            assert sorted(kinds) == ["tool_call", "tool_result"]
            skip = ("run_id", "agent_id")  # random per row
            stored.append([{c: getattr(r, c) for c in COLUMNS if c not in skip} for r in calls])
        assert len(stored[0]) == 2
        assert stored[0] == stored[1]
    finally:
        await engine.dispose()


async def test_the_sqlite_journal_writer_stores_what_the_session_path_stores(
    tmp_path: Path,
) -> None:
    """On SQLite a batch of events and audit rows is one transaction in the writer's thread
    (`app/chat/sqlitewrite.py`): the rows are those the session path stores."""
    from app.chat.hub import RunHub
    from app.chat.journal import JournalBatcher
    from app.chat.models import RunEventRecord
    from app.chat.sqlitewrite import SqliteJournal

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'quiver.db'}", data_dir=tmp_path)
    await asyncio.to_thread(upgrade, settings)
    engine = create_engine(settings)
    maker = create_sessionmaker(engine)
    try:
        runs = await two_session_runs(maker)
        data = {"name": "mcp", "text": "nul\x00here", "when": "2026-12-02T10:00:00+01:00"}
        for run_id, writer in zip(runs, (SqliteJournal(settings), None), strict=True):
            batcher = JournalBatcher(sessionmaker=maker, hub=RunHub(), sqlite=writer)
            await batcher.enqueue(run_id, 1, "tool_call", data, None)
            await batcher.enqueue(run_id, 2, "tool_result", {"ok": True}, None, _rows(run_id))
            await batcher.aclose()
        stored = []
        for run_id in runs:
            async with maker() as session:
                events = (
                    await session.execute(
                        select(RunEventRecord.seq, RunEventRecord.kind, RunEventRecord.data)
                        .where(RunEventRecord.run_id == run_id)
                        .order_by(RunEventRecord.seq)
                    )
                ).all()
                calls = (
                    await session.scalars(
                        select(ToolCall).where(ToolCall.run_id == run_id).order_by(ToolCall.name)
                    )
                ).all()
            assert all(c.created_at.tzinfo is not None for c in calls)  # read back as UTC
            skip = ("run_id", "agent_id")  # random per row
            audit = [{c: getattr(r, c) for c in COLUMNS if c not in skip} for r in calls]
            stored.append(([tuple(e) for e in events], audit))
        assert [kind for _, kind, _ in stored[0][0]] == ["tool_call", "tool_result"]
        assert stored[0][0][0][2]["text"] == "nul\ufffdhere"  # no NUL reaches the store
        assert len(stored[0][1]) == 2
        assert stored[0] == stored[1]
    finally:
        await engine.dispose()


def test_an_audit_row_has_every_column_of_the_table() -> None:
    """`AuditRow` is written as arrays, column values or an ORM object: a column added to
    `tool_calls` must be added to it too, or it would be left out of every write."""
    assert set(record.COLUMNS) == {c.key for c in ToolCall.__table__.columns}
    row = _rows(uuid.uuid4())[0]
    assert {c.key: getattr(row.to_orm(), c.key) for c in ToolCall.__table__.columns} == (
        row.values()
    )
