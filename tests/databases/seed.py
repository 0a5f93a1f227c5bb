"""Seeded throwaway databases for the database-connector tests (Postgres, MariaDB, SQLite)."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiomysql
import asyncpg

PG_ADMIN_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
MYSQL_HOST = "127.0.0.1"
MYSQL_PORT = 3306
MYSQL_USER = "root"
BIG_ROWS = 12_000
HIDDEN_TABLE = "secrets"

_COMMON = [
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR(100) NOT NULL, "
    "email VARCHAR(200), country VARCHAR(2) NOT NULL, created_at TIMESTAMP NOT NULL)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL "
    "REFERENCES customers(id), amount DECIMAL(10,2) NOT NULL, status VARCHAR(20) NOT NULL, "
    "ordered_at DATE NOT NULL, meta {json})",
    "CREATE TABLE secrets (id INTEGER PRIMARY KEY, api_key VARCHAR(100) NOT NULL)",
    "CREATE TABLE audit_log (id INTEGER PRIMARY KEY, note VARCHAR(100) NOT NULL)",
    "CREATE TABLE big_numbers (n INTEGER PRIMARY KEY, label VARCHAR(20) NOT NULL)",
]

_PG_EXTRA = [
    "COMMENT ON TABLE customers IS 'Customer master data'",
    "COMMENT ON COLUMN customers.country IS 'ISO 3166 alpha-2'",
    "CREATE TABLE kinds (id INTEGER PRIMARY KEY, u UUID, b BYTEA, d NUMERIC(30,10), "
    "t TIMESTAMPTZ, i INTERVAL, j JSONB, ip INET, f DOUBLE PRECISION, arr INTEGER[])",
    "INSERT INTO kinds VALUES (1, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\xdeadbeef', "
    "12345678901234567890.0123456789, '2024-05-01T10:00:00+00', '1 day 2 hours', "
    "'{\"k\": [1, 2]}', '10.0.0.1', 'NaN', ARRAY[1,2,3])",
    "CREATE SEQUENCE order_seq",
    "CREATE FUNCTION evil_write() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN "
    "INSERT INTO audit_log VALUES (999, 'pwned'); RETURN 1; END $$",
    "CREATE FUNCTION reopen_writes() RETURNS text LANGUAGE sql AS $$ "
    "SELECT set_config('default_transaction_read_only', 'off', false) $$",
    "CREATE FUNCTION slow_value(s double precision) RETURNS integer LANGUAGE plpgsql AS $$ "
    "BEGIN PERFORM count(*) FROM generate_series(1, 100000000); RETURN 1; END $$",
]
_MYSQL_EXTRA = [
    "ALTER TABLE customers COMMENT = 'Customer master data'",
    "ALTER TABLE customers MODIFY country VARCHAR(2) NOT NULL COMMENT 'ISO 3166 alpha-2'",
    "CREATE TABLE kinds (id INTEGER PRIMARY KEY, b VARBINARY(16), d DECIMAL(30,10), "
    "t DATETIME(6), tm TIME, f DOUBLE, s SET('a','b','c'))",
    "INSERT INTO kinds VALUES (1, X'DEADBEEF', 12345678901234567890.0123456789, "
    "'2024-05-01 10:00:00.5', '26:00:00', 1.5, 'a,c')",
    "CREATE FUNCTION evil_write() RETURNS INTEGER MODIFIES SQL DATA BEGIN "
    "INSERT INTO audit_log VALUES (999, 'pwned'); RETURN 1; END",
]
_SQLITE_EXTRA = [
    "CREATE TABLE kinds (id INTEGER PRIMARY KEY, b BLOB, f REAL)",
    "INSERT INTO kinds VALUES (1, X'DEADBEEF', 1.5)",
]


def _ddl(dialect: str) -> list[str]:
    json_type = {"postgresql": "JSONB", "mysql": "JSON", "sqlite": "TEXT"}[dialect]
    return [s.replace("{json}", json_type) for s in _COMMON]


def _rows() -> dict[str, list[tuple[Any, ...]]]:
    countries = ["DE", "FR", "US", "JP"]
    customers = [
        (i, f"Customer {i}", f"c{i}@example.com" if i % 3 else None, countries[i % 4],
         f"2024-01-{1 + i % 28:02d} 12:00:00")
        for i in range(1, 51)
    ]  # fmt: skip
    statuses = ["paid", "open", "refunded"]
    orders = [
        (i, 1 + i % 50, f"{(i * 7.31) % 500:.2f}", statuses[i % 3], f"2024-{1 + i % 12:02d}-15",
         f'{{"channel": "{"web" if i % 2 else "shop"}", "items": {i % 5}}}')
        for i in range(1, 401)
    ]  # fmt: skip
    return {
        "customers": customers,
        "orders": orders,
        "secrets": [(1, "sk-live-TOPSECRET"), (2, "sk-live-ANOTHER")],
        "audit_log": [(1, "seeded")],
        "big_numbers": [(n, f"n{n}") for n in range(1, BIG_ROWS + 1)],
    }


def _insert_sql(table: str, width: int, mark: str) -> str:
    return f"INSERT INTO {table} VALUES ({', '.join(mark for _ in range(width))})"


@dataclass(frozen=True)
class SeededDb:
    dialect: str
    url: str
    name: str
    """Database name (Postgres/MariaDB) or file path (SQLite)."""


def new_name() -> str:
    return f"quiver_dbtest_{secrets.token_hex(4)}"


# --- Postgres -----------------------------------------------------------------------


async def create_postgres() -> SeededDb:
    name = new_name()
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:5432/{name}")
    try:
        for stmt in _ddl("postgresql") + _PG_EXTRA:
            await conn.execute(stmt)
        for table, rows in _rows().items():
            converted = [_pg_row(table, r) for r in rows]
            await conn.executemany(_pg_insert(table, len(rows[0])), converted)
    finally:
        await conn.close()
    return SeededDb("postgresql", f"postgresql://postgres@127.0.0.1:5432/{name}", name)


def _pg_insert(table: str, width: int) -> str:
    marks = ", ".join(f"${i}" for i in range(1, width + 1))
    return f"INSERT INTO {table} VALUES ({marks})"


def _pg_row(table: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    import datetime as dt
    from decimal import Decimal

    if table == "customers":
        return (*row[:4], dt.datetime.fromisoformat(row[4]))
    if table == "orders":
        return (row[0], row[1], Decimal(row[2]), row[3], dt.date.fromisoformat(row[4]), row[5])
    return row


async def drop_postgres(db: SeededDb) -> None:
    admin = await asyncpg.connect(PG_ADMIN_DSN)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{db.name}" WITH (FORCE)')
    finally:
        await admin.close()


async def snapshot_postgres(db: SeededDb) -> dict[str, Any]:
    conn = await asyncpg.connect(db.url)
    try:
        tables = [
            r["tablename"]
            for r in await conn.fetch(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        routines = await conn.fetchval(
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'public'"
        )
        seq = await conn.fetchval("SELECT last_value FROM order_seq")
        data = {t: [tuple(r) for r in await conn.fetch(f'SELECT * FROM "{t}" ORDER BY 1')]
                for t in tables}  # fmt: skip
    finally:
        await conn.close()
    return _digest(tables, data, extra=(routines, seq))


# --- MariaDB ------------------------------------------------------------------------


async def _mysql_connect(db: str | None = None) -> aiomysql.Connection:
    return await aiomysql.connect(
        host=MYSQL_HOST, port=MYSQL_PORT, user=MYSQL_USER, password="", db=db, autocommit=True
    )


async def create_mysql() -> SeededDb:
    name = new_name()
    conn = await _mysql_connect()
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"CREATE DATABASE `{name}`")
            await cur.execute(f"USE `{name}`")
            for stmt in _ddl("mysql") + _MYSQL_EXTRA:
                await cur.execute(stmt)
            for table, rows in _rows().items():
                await cur.executemany(_insert_sql(table, len(rows[0]), "%s"), rows)
    finally:
        conn.close()
    return SeededDb("mysql", f"mysql://root@{MYSQL_HOST}:{MYSQL_PORT}/{name}", name)


async def drop_mysql(db: SeededDb) -> None:
    conn = await _mysql_connect()
    try:
        async with conn.cursor() as cur:
            await cur.execute(f"DROP DATABASE IF EXISTS `{db.name}`")
    finally:
        conn.close()


async def snapshot_mysql(db: SeededDb) -> dict[str, Any]:
    conn = await _mysql_connect(db.name)
    try:
        async with conn.cursor() as cur:
            await cur.execute("SHOW FULL TABLES")
            tables = sorted(str(r[0]) for r in await cur.fetchall())
            await cur.execute(
                "SELECT count(*) FROM information_schema.routines WHERE routine_schema = %s",
                (db.name,),
            )
            (routines,) = await cur.fetchone()
            data = {}
            for t in tables:
                await cur.execute(f"SELECT * FROM `{t}` ORDER BY 1")
                data[t] = [tuple(r) for r in await cur.fetchall()]
    finally:
        conn.close()
    return _digest(tables, data, extra=(routines,))


# --- SQLite -------------------------------------------------------------------------


def create_sqlite(directory: str) -> SeededDb:
    path = f"{directory}/{new_name()}.sqlite3"
    with sqlite3.connect(path) as conn:
        for stmt in _ddl("sqlite") + _SQLITE_EXTRA:
            conn.execute(stmt)
        for table, rows in _rows().items():
            conn.executemany(_insert_sql(table, len(rows[0]), "?"), rows)
    conn.close()
    return SeededDb("sqlite", f"sqlite:///{path}", path)


def snapshot_sqlite(db: SeededDb) -> dict[str, Any]:
    conn = sqlite3.connect(db.name)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]  # fmt: skip
        schema = conn.execute("SELECT group_concat(sql, ';') FROM sqlite_master").fetchone()[0]
        data = {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall() for t in tables}
    finally:
        conn.close()
    return _digest(tables, data, extra=(schema,))


def _digest(
    tables: Sequence[str], data: dict[str, list[tuple[Any, ...]]], *, extra: tuple[Any, ...]
) -> dict[str, Any]:
    digest = hashlib.sha256(repr((list(tables), sorted(data.items()), extra)).encode())
    return {
        "tables": list(tables),
        "counts": {t: len(rows) for t, rows in data.items()},
        "checksum": digest.hexdigest(),
    }
