"""Fixtures for the database-connector tests: seeded throwaway databases per dialect."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from app.databases.engines import EngineCache
from app.databases.models import DatabaseConnector
from app.databases.query import DatabaseExecutor
from tests.databases import seed
from tests.databases.seed import SeededDb

DIALECTS = ("postgresql", "mysql", "sqlite")
HIDDEN_CACHE = [{"name": seed.HIDDEN_TABLE, "description": "", "hidden": True, "columns": []}]


@pytest.fixture(scope="session")
async def pg_db() -> AsyncIterator[SeededDb]:
    db = await seed.create_postgres()
    yield db
    await seed.drop_postgres(db)


@pytest.fixture(scope="session")
async def mysql_db() -> AsyncIterator[SeededDb]:
    db = await seed.create_mysql()
    yield db
    await seed.drop_mysql(db)


@pytest.fixture(scope="session")
def sqlite_db(tmp_path_factory: pytest.TempPathFactory) -> SeededDb:
    return seed.create_sqlite(str(tmp_path_factory.mktemp("sqlite-dbtest")))


@pytest.fixture(scope="session")
def seeded(pg_db: SeededDb, mysql_db: SeededDb, sqlite_db: SeededDb) -> dict[str, SeededDb]:
    return {"postgresql": pg_db, "mysql": mysql_db, "sqlite": sqlite_db}


@pytest.fixture(scope="session")
async def engine_cache() -> AsyncIterator[EngineCache]:
    cache = EngineCache()
    yield cache
    await cache.aclose()


@pytest.fixture(scope="session")
def db_executor(engine_cache: EngineCache) -> DatabaseExecutor:
    return DatabaseExecutor(engine_cache)


def make_connector(db: SeededDb, **overrides: Any) -> DatabaseConnector:
    """An in-memory connector for a seeded database (`secrets` hidden)."""
    fields: dict[str, Any] = {
        "id": uuid.uuid4(),
        "name": f"shop_{db.dialect}",
        "description": "",
        "url": db.url,
        "dialect": db.dialect,
        "read_only": True,
        "max_rows": 1000,
        "query_timeout_s": 10.0,
        "schema_cache": [dict(t) for t in HIDDEN_CACHE],
    }
    fields.update(overrides)
    return DatabaseConnector(**fields)


@pytest.fixture(scope="session")
def connectors(seeded: dict[str, SeededDb]) -> dict[str, DatabaseConnector]:
    """One long-lived read-only connector per dialect (shares pooled engines)."""
    return {d: make_connector(db) for d, db in seeded.items()}


@pytest.fixture(scope="session")
def snapshot() -> Callable[[SeededDb], Any]:
    async def take(db: SeededDb) -> dict[str, Any]:
        if db.dialect == "postgresql":
            return await seed.snapshot_postgres(db)
        if db.dialect == "mysql":
            return await seed.snapshot_mysql(db)
        return seed.snapshot_sqlite(db)

    return take


def corpus_path(name: str) -> Path:
    return Path(__file__).parent / "corpus" / name
