"""The tool-call audit sink writes the same rows through asyncpg as through the ORM."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select

from app.audit.models import ToolCall
from app.audit.record import tool_call_row
from app.audit.sink import ToolCallSink
from app.chat.pgwrite import asyncpg_dsn
from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.tools.base import CallContext, ToolResult

COLUMNS = (
    "run_id",
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


def _rows(run_id: uuid.UUID) -> list[ToolCall]:
    ctx = CallContext(run_id=str(run_id), agent_id=str(uuid.uuid4()), user="ann")
    ok = tool_call_row(
        name="mcp",
        arguments={"n": [1, {"a": None}]},
        tool=None,
        step="mcp:clock/get_current_time",
        result=ToolResult.success("12:00"),
        ctx=ctx,
        latency_ms=1.23456,
    )
    failed = tool_call_row(
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
        assert by_fast == by_orm
    finally:
        await engine.dispose()
