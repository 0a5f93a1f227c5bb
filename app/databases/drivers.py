"""Per-dialect execution on a native driver connection (asyncpg, aiomysql, aiosqlite).

Each driver opens a read-only transaction (or a plain one for `read_only=False`
connectors), arms a server-side statement timeout, fetches at most `cap` rows and ends
the transaction. Server errors are re-raised as `DriverError`/`DriverTimeout` carrying
whether the connection can go back to the pool.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import aiomysql
import aiosqlite
import asyncpg  # type: ignore[import-untyped]
import pymysql  # type: ignore[import-untyped]

from app.databases.readonly import CheckedSql

_MYSQL_TIMEOUT_ERRNOS = frozenset({1969, 3024})
"""MariaDB max_statement_time / MySQL max_execution_time exceeded."""
_SQLITE_PROGRESS_OPS = 10_000


@dataclass(kw_only=True)
class RawResult:
    columns: list[str]
    rows: Sequence[Sequence[Any]]
    affected: int | None = None
    """Rows changed by a write statement (`read_only=False` connectors only)."""
    dirty: bool = False
    """The session holds unread rows; discard the connection instead of pooling it."""


class DriverError(Exception):
    def __init__(self, original: BaseException, *, reusable: bool) -> None:
        super().__init__(str(original))
        self.original = original
        self.reusable = reusable


class DriverTimeout(DriverError):
    pass


class Driver(Protocol):
    async def run(
        self, conn: Any, checked: CheckedSql, *, read_only: bool, cap: int, timeout_s: float
    ) -> RawResult: ...


async def _quietly(action: Callable[[], Any]) -> bool:
    """Run a clean-up coroutine; report whether it succeeded."""
    try:
        await action()
    except Exception:
        return False
    return True


class PostgresDriver:
    async def run(
        self,
        conn: asyncpg.Connection,
        checked: CheckedSql,
        *,
        read_only: bool,
        cap: int,
        timeout_s: float,
    ) -> RawResult:
        mode = " READ ONLY" if read_only else ""
        # One round trip: transaction, timeout and literal rules the validator assumes.
        await conn.execute(
            f"BEGIN{mode}; SET LOCAL statement_timeout = {max(1, int(timeout_s * 1000))}; "
            "SET LOCAL standard_conforming_strings = on"
        )
        try:
            if checked.kind == "write":
                result = await self._write(conn, checked.sql)
                await conn.execute("COMMIT")
                return result
            result = await self._read(conn, checked.sql, cap)
        except asyncpg.PostgresError as exc:
            reusable = await _quietly(lambda: conn.execute("ROLLBACK"))
            if isinstance(exc, asyncpg.QueryCanceledError):
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        await conn.execute("ROLLBACK")
        return result

    async def _read(self, conn: asyncpg.Connection, sql: str, cap: int) -> RawResult:
        rows = await _fetch_at_most(conn, sql, cap)
        if rows:
            columns = list(rows[0].keys())
        else:
            columns = [a.name for a in (await conn.prepare(sql)).get_attributes()]
        return RawResult(columns=columns, rows=rows)

    async def _write(self, conn: asyncpg.Connection, sql: str) -> RawResult:
        stmt = await conn.prepare(sql)
        rows = await stmt.fetch()
        status = stmt.get_statusmsg() or ""
        last = status.rsplit(" ", 1)[-1]
        affected = int(last) if last.isdigit() else len(rows)
        columns = [a.name for a in stmt.get_attributes()]
        return RawResult(columns=columns, rows=rows, affected=affected)


async def _fetch_at_most(conn: asyncpg.Connection, sql: str, cap: int) -> list[Any]:
    """At most `cap` rows in one round trip: Bind/Execute with a row limit, so the server
    stops producing rows at `cap`. `Connection._execute(query, args, limit, timeout)` is
    the call behind `fetch()` (which passes limit=0); the public cursor API gives the same
    rows at one await per row."""
    execute = getattr(conn, "_execute", None)
    if execute is not None:
        rows: list[Any] = await execute(sql, (), cap, None)
        return rows
    rows = []
    async for record in conn.cursor(sql, prefetch=cap):
        rows.append(record)
        if len(rows) >= cap:
            break
    return rows


class MySqlDriver:
    async def run(
        self,
        conn: aiomysql.Connection,
        checked: CheckedSql,
        *,
        read_only: bool,
        cap: int,
        timeout_s: float,
    ) -> RawResult:
        cur = await conn.cursor(aiomysql.SSCursor)
        try:
            if "mariadb" in conn.get_server_info().lower():
                await cur.execute(f"SET SESSION max_statement_time = {timeout_s:.3f}")
            else:
                await cur.execute(f"SET SESSION max_execution_time = {int(timeout_s * 1000)}")
            await cur.execute("START TRANSACTION READ ONLY" if read_only else "START TRANSACTION")
            await cur.execute(checked.sql)
            columns = [str(d[0]) for d in cur.description or ()]
            if checked.kind == "write":
                rows = list(await cur.fetchall()) if columns else []
                affected = cur.rowcount
                await cur.execute("COMMIT")
                return RawResult(columns=columns, rows=rows, affected=affected)
            rows = list(await cur.fetchmany(cap)) if columns else []
            if len(rows) >= cap and await cur.fetchone() is not None:
                # More rows are streaming in; draining them would read the whole result.
                return RawResult(columns=columns, rows=rows, dirty=True)
            await cur.execute("ROLLBACK")
        except pymysql.err.MySQLError as exc:
            errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
            reusable = await _quietly(lambda: cur.execute("ROLLBACK"))
            if errno in _MYSQL_TIMEOUT_ERRNOS:
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        await cur.close()
        return RawResult(columns=columns, rows=rows)


class SqliteDriver:
    async def run(
        self,
        conn: aiosqlite.Connection,
        checked: CheckedSql,
        *,
        read_only: bool,
        cap: int,
        timeout_s: float,
    ) -> RawResult:
        deadline = time.monotonic() + timeout_s

        def past_deadline() -> int:
            return 1 if time.monotonic() > deadline else 0

        # SQLite has no server: the progress handler is the in-engine statement timeout.
        await conn.set_progress_handler(past_deadline, _SQLITE_PROGRESS_OPS)
        try:
            return await self._run(conn, checked, read_only=read_only, cap=cap)
        except sqlite3.Error as exc:
            reusable = await _quietly(conn.rollback)
            if "interrupted" in str(exc):
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        finally:
            await _quietly(lambda: conn.set_progress_handler(None, 0))  # type: ignore[arg-type]

    async def _run(
        self, conn: aiosqlite.Connection, checked: CheckedSql, *, read_only: bool, cap: int
    ) -> RawResult:
        await conn.execute(f"PRAGMA query_only = {'ON' if read_only else 'OFF'}")
        if not conn.in_transaction:
            await conn.execute("BEGIN")
        async with conn.execute(checked.sql) as cur:
            columns = [str(d[0]) for d in cur.description or ()]
            if checked.kind == "write":
                rows = list(await cur.fetchall())
                affected = cur.rowcount
                await conn.commit()
                return RawResult(columns=columns, rows=rows, affected=affected)
            rows = list(await cur.fetchmany(cap))
        await conn.rollback()
        return RawResult(columns=columns, rows=rows)


DRIVERS: dict[str, Driver] = {
    "postgresql": PostgresDriver(),
    "mysql": MySqlDriver(),
    "sqlite": SqliteDriver(),
}
