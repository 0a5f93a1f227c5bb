"""Writes through the ORM (the session path every store and feature uses) replace NUL with
U+FFFD in text and JSON columns, on PostgreSQL (which refuses NUL) and SQLite alike."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.models import ToolCall
from app.config import Settings
from app.db import storable
from app.db.engine import create_engine, create_sessionmaker
from app.db.migrate import upgrade


async def _round_trip(session: AsyncSession) -> None:
    row = ToolCall(
        kind="builtin",
        name="http_fetch",
        target="a\x00b",
        arguments={"q": "x\x00y", "k\x00": ["\x00"]},
        error="bad\x00byte",
    )
    session.add(row)
    await session.flush()
    session.expunge_all()
    stored = (await session.execute(select(ToolCall).where(ToolCall.id == row.id))).scalar_one()
    assert stored.target == "a\ufffdb"
    assert stored.error == "bad\ufffdbyte"
    assert stored.arguments == {"q": "x\ufffdy", "k\ufffd": ["\ufffd"]}


async def test_orm_writes_on_postgres(session: AsyncSession) -> None:
    await _round_trip(session)


async def test_orm_writes_on_sqlite(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/q.db", data_dir=tmp_path)
    await asyncio.to_thread(upgrade, settings)
    engine = create_engine(settings)
    try:
        async with create_sessionmaker(engine)() as session:
            await _round_trip(session)
    finally:
        await engine.dispose()


def test_json_text_leaves_an_escaped_backslash_alone() -> None:
    assert storable.json_text({"a": "\\u0000"}) == '{"a":"\\\\u0000"}'
    assert storable.json_text({"a": "\x00"}) == '{"a":"\\ufffd"}'
    same = {"a": ["b", 1]}
    assert storable.params(same) is same
