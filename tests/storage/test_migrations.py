"""Alembic: a full up/down/up round trip, and head matches the models (`alembic check`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from app.config import Settings
from app.db.engine import create_engine
from app.db.migrate import downgrade, upgrade
from app.migrations.registry import Base
from tests.fixtures.database import create_database, drop_database

APP_TABLES = {
    "agents",
    "agent_connectors",
    "agent_databases",
    "agent_mcp_servers",
    "agent_skills",
    "api_keys",
    "connectors",
    "connector_actions",
    "connector_calls",
    "conventions",
    "database_connectors",
    "mcp_servers",
    "run_starts",
    "skills",
    "tool_calls",
}


def _diff(conn: Connection) -> list[Any]:
    """What `alembic check` compares, with the options env.py uses."""
    context = MigrationContext.configure(
        conn,
        opts={"compare_type": True, "render_as_batch": conn.dialect.name == "sqlite"},
    )
    return list(compare_metadata(context, Base.metadata))


def _tables(conn: Connection) -> set[str]:
    return set(inspect(conn).get_table_names()) - {"alembic_version"}


async def _state(settings: Settings) -> tuple[set[str], list[Any]]:
    engine = create_engine(settings)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_tables), await conn.run_sync(_diff)
    finally:
        await engine.dispose()


async def _round_trip(settings: Settings) -> None:
    await asyncio.to_thread(upgrade, settings)
    tables, diff = await _state(settings)
    assert tables >= APP_TABLES
    assert set(Base.metadata.tables) == tables, "every model table is migrated, nothing else"
    assert diff == [], "models and migrations disagree"

    await asyncio.to_thread(downgrade, settings, "base")
    assert (await _state(settings))[0] == set()

    await asyncio.to_thread(upgrade, settings)
    tables, diff = await _state(settings)
    assert set(Base.metadata.tables) == tables
    assert diff == []


async def test_round_trip_on_postgres() -> None:
    name = await create_database("quiver_migrations")
    try:
        await _round_trip(Settings(database_url=f"postgresql://postgres@127.0.0.1:5432/{name}"))
    finally:
        await drop_database(name)


async def test_round_trip_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'migrations.db'}"
    await _round_trip(Settings(database_url=url, data_dir=tmp_path))
