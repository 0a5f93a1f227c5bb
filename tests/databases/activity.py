"""Is a statement still running on the seeded databases? Seen from the server (or the file)."""

from __future__ import annotations

import asyncio
import sqlite3

import aiomysql
import asyncpg

from tests.databases import seed
from tests.databases.seed import SeededDb

SLOW_SQL = {
    "postgresql": "SELECT count(*) FROM generate_series(1, 2000000000)",
    "mysql": "SELECT count(*) FROM big_numbers a, big_numbers b, big_numbers c",
    "sqlite": "SELECT count(*) FROM big_numbers a, big_numbers b, big_numbers c",
}
"""Read queries the SQL guard accepts that run far longer than any test."""


async def pg_running(db: SeededDb) -> int:
    """Backends of `db` running the slow query (pg_stat_activity)."""
    conn = await asyncpg.connect(seed.PG_ADMIN_DSN)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND state = 'active' "
            "AND query LIKE '%generate_series%' AND pid <> pg_backend_pid()",
            db.name,
        )
    finally:
        await conn.close()
    return count


async def mysql_running(db: SeededDb) -> int:
    """Threads of `db` running the slow query (the process list)."""
    conn = await aiomysql.connect(
        host=seed.MYSQL_HOST, port=seed.MYSQL_PORT, user=seed.MYSQL_USER, password=""
    )
    try:
        async with conn.cursor() as cur:
            await cur.execute(
                "SELECT count(*) FROM information_schema.processlist WHERE db = %s "
                "AND command = 'Query' AND info LIKE %s",
                (db.name, "%big_numbers a%"),
            )
            row = await cur.fetchone()
    finally:
        conn.close()
    return int(row[0])


def sqlite_locked(db: SeededDb) -> bool:
    """A running read holds the file's shared lock (rollback journal): no writer gets in."""
    conn = sqlite3.connect(db.name, timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return True
    finally:
        conn.close()
    return False


async def running(db: SeededDb) -> bool:
    """Is the slow query running on `db`?"""
    if db.dialect == "postgresql":
        return await pg_running(db) > 0
    if db.dialect == "mysql":
        return await mysql_running(db) > 0
    return await asyncio.to_thread(sqlite_locked, db)
