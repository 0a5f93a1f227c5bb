"""Migration 0006 keeps every stored run (SQLite rebuilds `runs` and `conversations` in batch
mode: with foreign keys on, that would cascade into their journals) and, from then on, an
agent's deletion leaves its conversations, runs and journal in place. Both stores."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import Executable, delete, insert, text

from app.agents.models import Agent
from app.chat.models import Conversation, Message, Run, RunEventRecord
from app.config import Settings
from app.db.engine import create_engine
from app.db.migrate import downgrade, upgrade
from tests.fixtures.database import create_database, drop_database

BEFORE = "0005_tool_call_history"
TABLES = ("conversations", "runs", "run_events", "messages")


@pytest.fixture(params=["postgres", "sqlite"])
async def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    if request.param == "sqlite":
        yield Settings(database_url=f"sqlite:///{tmp_path / 'h.db'}", data_dir=tmp_path)
        return
    name = await create_database("quiver_history")
    try:
        yield Settings(database_url=f"postgresql://postgres@127.0.0.1:5432/{name}")
    finally:
        await drop_database(name)


async def _write(settings: Settings, *statements: Executable) -> None:
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            for statement in statements:
                await conn.execute(statement)
    finally:
        await engine.dispose()


async def _counts(settings: Settings) -> dict[str, int]:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            return {
                t: (await conn.execute(text(f"SELECT count(*) FROM {t}"))).scalar_one()
                for t in TABLES
            }
    finally:
        await engine.dispose()


async def test_history_survives_the_migration_and_the_agent(empty_store: Settings) -> None:
    await asyncio.to_thread(upgrade, empty_store, BEFORE)
    ids = {k: uuid.uuid4() for k in ("agent", "conversation", "run")}
    await _write(
        empty_store,
        insert(Agent.__table__).values(id=ids["agent"], name="old"),
        insert(Conversation.__table__).values(
            id=ids["conversation"], agent_id=ids["agent"], title="t"
        ),
        insert(Run.__table__).values(
            id=ids["run"], conversation_id=ids["conversation"], agent_id=ids["agent"]
        ),
        insert(RunEventRecord.__table__).values(run_id=ids["run"], seq=1, kind="run_started"),
        insert(Message.__table__).values(
            conversation_id=ids["conversation"], run_id=ids["run"], seq=1, role="user"
        ),
    )
    assert await _counts(empty_store) == dict.fromkeys(TABLES, 1)
    await asyncio.to_thread(upgrade, empty_store)
    assert await _counts(empty_store) == dict.fromkeys(TABLES, 1), "the rebuild kept every row"
    await _write(empty_store, delete(Agent.__table__).where(Agent.__table__.c.id == ids["agent"]))
    assert await _counts(empty_store) == dict.fromkeys(TABLES, 1), "history outlives the agent"
    # going back restores the foreign keys, without the history of agents that are gone
    await asyncio.to_thread(downgrade, empty_store, BEFORE)
    assert await _counts(empty_store) == dict.fromkeys(TABLES, 0)
