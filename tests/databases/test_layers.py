"""Defence in depth: what happens if a statement slips past the validator.

These tests hand the drivers statements the validator would refuse (a forged
`CheckedSql`), proving each layer under it holds on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.databases.drivers import DRIVERS, DriverError
from app.databases.engines import EngineCache
from app.databases.models import DatabaseConnector
from app.databases.readonly import CheckedSql
from tests.databases.conftest import DIALECTS
from tests.databases.seed import SeededDb

_MULTI_STATEMENT_ERRORS = {
    "postgresql": "cannot insert multiple commands into a prepared statement",
    "mysql": "SQL syntax",
    "sqlite": "one statement at a time",
}


async def _run_forged(cache: EngineCache, connector: DatabaseConnector, sql: str) -> Any:
    engine = await cache.get(connector)
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        try:
            return await DRIVERS[connector.dialect].run(
                raw.driver_connection,
                CheckedSql(sql=sql, kind="read"),
                read_only=connector.read_only,
                cap=10,
                timeout_s=5.0,
            )
        except DriverError as exc:
            if not exc.reusable:
                await conn.invalidate()
            raise


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_read_only_transaction_refuses_a_write_that_bypassed_the_validator(
    dialect: str,
    engine_cache: EngineCache,
    connectors: dict[str, DatabaseConnector],
    seeded: dict[str, SeededDb],
    snapshot: Callable[[SeededDb], Any],
) -> None:
    before = await snapshot(seeded[dialect])
    with pytest.raises(DriverError) as refused:
        await _run_forged(engine_cache, connectors[dialect], "DELETE FROM orders")
    message = str(refused.value).lower()
    assert any(s in message for s in ("read-only", "read only", "readonly")), message
    assert refused.value.reusable is True
    assert await snapshot(seeded[dialect]) == before


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_drivers_refuse_multi_statement_strings(
    dialect: str,
    engine_cache: EngineCache,
    connectors: dict[str, DatabaseConnector],
    seeded: dict[str, SeededDb],
    snapshot: Callable[[SeededDb], Any],
) -> None:
    before = await snapshot(seeded[dialect])
    with pytest.raises(DriverError, match=_MULTI_STATEMENT_ERRORS[dialect]):
        await _run_forged(engine_cache, connectors[dialect], "SELECT 1; DELETE FROM audit_log")
    assert await snapshot(seeded[dialect]) == before


async def test_postgres_read_only_connections_default_to_read_only_transactions(
    engine_cache: EngineCache, connectors: dict[str, DatabaseConnector]
) -> None:
    engine = await engine_cache.get(connectors["postgresql"])
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        native = raw.driver_connection
        assert await native.fetchval("SHOW default_transaction_read_only") == "on"


async def test_mysql_read_only_sessions_default_to_read_only_transactions(
    engine_cache: EngineCache, connectors: dict[str, DatabaseConnector]
) -> None:
    engine = await engine_cache.get(connectors["mysql"])
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        async with raw.driver_connection.cursor() as cur:
            await cur.execute("SELECT @@SESSION.tx_read_only, @@SESSION.sql_mode")
            read_only, sql_mode = await cur.fetchone()
    assert read_only == 1
    assert "NO_BACKSLASH_ESCAPES" not in sql_mode
    assert "ANSI_QUOTES" not in sql_mode


async def test_sqlite_read_only_connectors_open_the_file_read_only(
    engine_cache: EngineCache,
    connectors: dict[str, DatabaseConnector],
) -> None:
    engine = await engine_cache.get(connectors["sqlite"])
    assert "mode=ro" in str(engine.url)
    with pytest.raises(DriverError, match=r"readonly|read-only|query_only"):
        await _run_forged(engine_cache, connectors["sqlite"], "CREATE TABLE evil (x INTEGER)")
