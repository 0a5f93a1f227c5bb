"""Alembic environment: async engines for Postgres (asyncpg) and SQLite (aiosqlite)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from app.config import Settings
from app.db.engine import create_engine
from app.db.locks import MIGRATIONS, lock_transaction
from app.migrations.registry import Base

config = context.config
target_metadata = Base.metadata


def _settings() -> Settings:
    attached = config.attributes.get("settings")
    return attached if isinstance(attached, Settings) else Settings()


def _configure(connection: Connection) -> None:
    if connection.dialect.name == "sqlite":
        # Batch mode rebuilds a table (copy, drop, rename): with foreign keys on, dropping the
        # old copy would cascade into its children (a run's journal, a conversation's runs).
        # Before any transaction is open, where SQLite honours the pragma.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()  # end the transaction the statement began (Alembic opens its own)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        # Another process migrating the same database meanwhile: wait for it, then find the
        # schema at head (the current revision is read after the lock is held).
        lock_transaction(connection, MIGRATIONS)
        context.run_migrations()


async def _run_async() -> None:
    engine = create_engine(_settings())
    async with engine.connect() as connection:
        await connection.run_sync(_configure)
    await engine.dispose()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    asyncio.run(_run_async())


if context.is_offline_mode():
    context.configure(
        url=_settings().async_database_url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
