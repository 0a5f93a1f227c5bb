"""Postgres advisory locks that serialise start-up work across processes (migrations, the
first admin key): two `quiver serve` or `quiver migrate` started at once on one database take
turns instead of racing on the catalog. Elsewhere (SQLite: one process) they are no-ops."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession

MIGRATIONS = 0x5175_6976_0001
"""Key of the migrations lock ("Quiv" + 1); held for the migration's transaction."""
SEED_ADMIN = 0x5175_6976_0002
"""Key of the first-start admin key lock."""

_LOCK = text("SELECT pg_advisory_xact_lock(:key)")


def lock_transaction(connection: Connection, key: int) -> None:
    """Wait for the lock `key`; it is released when the connection's transaction ends."""
    if connection.dialect.name == "postgresql":
        connection.execute(_LOCK, {"key": key})


async def lock_session_transaction(session: AsyncSession, key: int) -> None:
    """`lock_transaction` for a session's transaction."""
    if session.bind is not None and session.bind.dialect.name == "postgresql":
        await session.execute(_LOCK, {"key": key})
