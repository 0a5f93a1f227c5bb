from __future__ import annotations

import uuid

from app.databases.engines import EngineCache
from tests.databases.conftest import make_connector
from tests.databases.seed import SeededDb


async def test_engine_is_created_once_per_connector(sqlite_db: SeededDb) -> None:
    cache = EngineCache()
    try:
        conn = make_connector(sqlite_db)
        first = await cache.get(conn)
        assert await cache.get(conn) is first
        other = make_connector(sqlite_db)
        assert await cache.get(other) is not first
        assert len(cache) == 2
    finally:
        await cache.aclose()
    assert len(cache) == 0


async def test_url_or_mode_change_produces_a_new_engine(pg_db: SeededDb) -> None:
    cache = EngineCache()
    try:
        conn = make_connector(pg_db)
        first = await cache.get(conn)
        async with first.connect() as c:
            await c.exec_driver_sql("SELECT 1")
        assert first.pool.checkedin() == 1
        conn.url = pg_db.url + "?application_name=quiver_test"
        second = await cache.get(conn)
        assert second is not first
        assert first.pool.checkedin() == 0  # the old pool was disposed
        conn.read_only = False
        third = await cache.get(conn)
        assert third is not second
        assert len(cache) == 1
    finally:
        await cache.aclose()


async def test_dispose_drops_one_connector_and_is_idempotent(sqlite_db: SeededDb) -> None:
    cache = EngineCache()
    try:
        keep, drop = make_connector(sqlite_db), make_connector(sqlite_db)
        kept = await cache.get(keep)
        await cache.get(drop)
        await cache.dispose(drop.id)
        await cache.dispose(drop.id)
        await cache.dispose(uuid.uuid4())
        assert len(cache) == 1
        assert await cache.get(keep) is kept
    finally:
        await cache.aclose()


async def test_concurrent_first_use_creates_a_single_engine(mysql_db: SeededDb) -> None:
    import asyncio

    cache = EngineCache()
    try:
        conn = make_connector(mysql_db)
        engines = await asyncio.gather(*(cache.get(conn) for _ in range(10)))
        assert len({id(e) for e in engines}) == 1
    finally:
        await cache.aclose()
