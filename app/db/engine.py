"""Engine and sessionmaker for the gateway's own storage (asyncpg or aiosqlite)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Engine, event
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.ext.asyncio import AsyncSession as AsyncSession

from app.config import Settings
from app.db import storable


def create_engine(settings: Settings, **kwargs: Any) -> AsyncEngine:
    url = settings.async_database_url
    if url.startswith("sqlite"):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(
            url, connect_args={"timeout": 30}, json_serializer=storable.json_text, **kwargs
        )
        _sqlite_rules(engine.sync_engine)
        return engine
    if settings.behind_pooler:
        kwargs.setdefault("connect_args", pooled_connect_args())
    engine = create_async_engine(
        url,
        pool_pre_ping=True,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout=settings.db_pool_timeout_s,
        json_serializer=storable.json_text,
        **kwargs,
    )
    _store_no_nul(engine.sync_engine)
    return engine


def create_sqlite_writer_engine(settings: Settings) -> Engine:
    """A plain (pysqlite) engine on the SQLite store, with the same rules as `create_engine`'s,
    for a writer that runs whole transactions in a thread of its own (the journal's: one
    hand-off per batch instead of one per cursor, statement and commit through aiosqlite)."""
    url = settings.async_database_url.replace("sqlite+aiosqlite:", "sqlite:", 1)
    engine = sa_create_engine(
        url, connect_args={"timeout": 30}, json_serializer=storable.json_text, pool_size=1
    )
    _sqlite_rules(engine)
    return engine


def _sqlite_rules(engine: Engine) -> None:
    _store_no_nul(engine)
    _enable_sqlite_foreign_keys(engine)
    _sqlite_transactions(engine)
    _utc_sqlite_datetimes(engine)


def _store_no_nul(engine: Engine) -> None:
    """Text parameters of every statement without NUL characters (`storable`); JSON values
    are encoded without them by the engine's `json_serializer`."""

    @event.listens_for(engine, "before_cursor_execute", retval=True)
    def _clean(
        _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool
    ) -> tuple[str, Any]:
        return statement, storable.params(parameters)


def pooled_connect_args() -> dict[str, Any]:
    """asyncpg behind a transaction pooler (PgBouncer before 1.21 keeps no prepared statement
    across transactions): no statement caches, and a unique name for each statement prepared
    (SQLAlchemy's asyncpg dialect documents this)."""
    return {
        "statement_cache_size": 0,
        "prepared_statement_cache_size": 0,
        "prepared_statement_name_func": lambda: f"__asyncpg_{uuid.uuid4().hex}__",
    }


def _enable_sqlite_foreign_keys(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()


def _sqlite_transactions(engine: Engine) -> None:
    """A savepoint never opens an SQLite transaction by itself.

    The sqlite3 driver's legacy transaction control (Python < 3.16) emits BEGIN only before
    INSERT/UPDATE/DELETE: a SAVEPOINT sent first is then the outer transaction, and its
    RELEASE commits — the document row of a knowledge upload was durable before its chunks
    were written. So a savepoint outside a transaction first takes the write lock (BEGIN
    IMMEDIATE: it waits `timeout` for other writers, as the driver's own BEGIN does). Reads
    keep running outside transactions, as before; docs/operations.md, "SQLite transactions",
    says why this is not the BEGIN-on-every-transaction recipe."""

    @event.listens_for(engine, "savepoint")
    def _begin_first(conn: Connection, _name: str) -> None:
        driver: Any = conn.connection.driver_connection  # aiosqlite's (or sqlite3's) Connection
        if not driver.in_transaction:
            conn.exec_driver_sql("BEGIN IMMEDIATE")


class _UtcSqliteDateTime(sqlite.DATETIME):
    """SQLite keeps `DateTime(timezone=True)` as text without an offset: store UTC, read back
    aware UTC datetimes (Postgres does the same), so timestamps render as RFC 3339 with `Z`."""

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        process = super().bind_processor(dialect)
        if process is None:  # pragma: no cover - the SQLite type always has one
            return None

        def to_utc(value: Any) -> Any:
            if isinstance(value, datetime) and value.tzinfo is not None:
                value = value.astimezone(UTC)
            return process(value)

        return to_utc

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        process = super().result_processor(dialect, coltype)
        if not self.timezone or process is None:
            return process

        def aware(value: Any) -> Any:
            result = process(value)
            if isinstance(result, datetime) and result.tzinfo is None:
                return result.replace(tzinfo=UTC)
            return result

        return aware


def _utc_sqlite_datetimes(engine: Engine) -> None:
    dialect = engine.dialect
    dialect.colspecs = {**dialect.colspecs, DateTime: _UtcSqliteDateTime}


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False)
