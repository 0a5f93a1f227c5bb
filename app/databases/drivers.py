"""Per-dialect execution on a native driver connection (asyncpg, aiomysql, aiosqlite).

Each driver opens a read-only transaction (or a plain one for `read_only=False`
connectors), arms a server-side statement timeout, fetches at most `cap` rows and ends
the transaction. Server errors are re-raised as `DriverError`/`DriverTimeout` carrying
whether the connection can go back to the pool.

`cancel()` stops a statement whose caller went away (a cancelled run) on the server, so it
does not run on to its timeout: Postgres `pg_cancel_backend`, MySQL/MariaDB `KILL QUERY`
(both from a second connection, repeated until the session is seen idle), SQLite
`interrupt`.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiomysql
import aiosqlite
import asyncpg  # type: ignore[import-untyped,unused-ignore]
import pymysql  # type: ignore[import-untyped,unused-ignore]

from app.databases.readonly import CheckedSql

_MYSQL_TIMEOUT_ERRNOS = frozenset({1969, 3024})
"""MariaDB max_statement_time / MySQL max_execution_time exceeded."""
_SQLITE_PROGRESS_OPS = 10_000
_CANCEL_POLL_S = 0.02


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


ControlConnection = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens a second native connection to the same database (for cancel requests)."""


@dataclass(frozen=True, kw_only=True)
class Statement:
    """One checked statement and how to run it."""

    checked: CheckedSql
    read_only: bool
    cap: int
    """Rows read at most."""
    timeout_s: float
    session_timeout_s: float | None = None
    """The statement timeout the pool already set on the connection's session, if any."""


class Driver(ABC):
    """One dialect's way to run a checked statement on a native connection and to stop it."""

    @abstractmethod
    async def cancel(self, conn: Any, control: ControlConnection) -> None:
        """Stop the statement running on `conn` server-side."""

    @abstractmethod
    async def execute(self, conn: Any, statement: Statement) -> RawResult:
        """Run `statement` on `conn` in its own transaction."""

    async def run(
        self,
        conn: Any,
        checked: CheckedSql,
        *,
        read_only: bool,
        cap: int,
        timeout_s: float,
        session_timeout_s: float | None = None,
    ) -> RawResult:
        statement = Statement(
            checked=checked,
            read_only=read_only,
            cap=cap,
            timeout_s=timeout_s,
            session_timeout_s=session_timeout_s,
        )
        return await self.execute(conn, statement)


async def _quietly(action: Callable[[], Any]) -> bool:
    """Run a clean-up coroutine; report whether it succeeded."""
    try:
        await action()
    except Exception:
        return False
    return True


async def _until_stopped(
    running: Callable[[], Awaitable[bool]], cancel: Callable[[], Awaitable[None]]
) -> None:
    """Cancel until the session is seen idle twice in a row.

    A cancel reaching the server between two statements (the query still on its way) is
    ignored by the server, so one request is not enough; the caller bounds the loop.
    """
    quiet = 0
    while quiet < 2:
        if await running():
            quiet = 0
            await cancel()
        else:
            quiet += 1
        await asyncio.sleep(_CANCEL_POLL_S)


class PostgresDriver(Driver):
    async def cancel(self, conn: asyncpg.Connection, control: ControlConnection) -> None:
        pid = conn.get_server_pid()
        async with control() as other:

            async def running() -> bool:
                state = await other.fetchval(
                    "SELECT state FROM pg_stat_activity WHERE pid = $1", pid
                )
                return bool(state == "active")

            async def cancel() -> None:
                await other.fetchval("SELECT pg_cancel_backend($1)", pid)

            await _until_stopped(running, cancel)

    async def execute(self, conn: asyncpg.Connection, statement: Statement) -> RawResult:
        if (
            statement.read_only
            and statement.checked.kind != "write"
            and statement.session_timeout_s == statement.timeout_s
            and _session_locked_read_only(conn)
        ):
            return await self._run_implicit(conn, statement.checked.sql, statement.cap)
        mode = " READ ONLY" if statement.read_only else ""
        timeout_ms = max(1, int(statement.timeout_s * 1000))
        # One round trip: transaction, timeout and literal rules the validator assumes.
        await conn.execute(
            f"BEGIN{mode}; SET LOCAL statement_timeout = {timeout_ms}; "
            "SET LOCAL standard_conforming_strings = on"
        )
        try:
            if statement.checked.kind == "write":
                result = await self._write(conn, statement.checked.sql)
                await conn.execute("COMMIT")
                return result
            result = await self._read(conn, statement.checked.sql, statement.cap)
        except asyncpg.PostgresError as exc:
            reusable = await _quietly(lambda: conn.execute("ROLLBACK"))
            if isinstance(exc, asyncpg.QueryCanceledError):
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        await conn.execute("ROLLBACK")
        return result

    async def _run_implicit(self, conn: asyncpg.Connection, sql: str, cap: int) -> RawResult:
        """One round trip: the session was opened with default_transaction_read_only=on,
        the connector's statement_timeout and standard_conforming_strings=on, so the
        statement's implicit transaction is already read-only and time-limited."""
        try:
            result = await self._read(conn, sql, cap)
        except asyncpg.PostgresError as exc:
            reusable = not conn.is_in_transaction() and _session_locked_read_only(conn)
            if isinstance(exc, asyncpg.QueryCanceledError):
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        # A function that changed the session defaults (reported by the server through
        # ParameterStatus) makes this connection unfit for the pool.
        result.dirty = not _session_locked_read_only(conn)
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


def _session_locked_read_only(conn: asyncpg.Connection) -> bool:
    """The server-reported session state (PostgreSQL ≥ 14 reports both settings)."""
    settings = conn.get_settings()
    return (
        getattr(settings, "default_transaction_read_only", None) == "on"
        and getattr(settings, "standard_conforming_strings", None) == "on"
        and not conn.is_in_transaction()
    )


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


class MySqlDriver(Driver):
    async def cancel(self, conn: aiomysql.Connection, control: ControlConnection) -> None:
        thread = int(conn.thread_id())
        async with control() as other, other.cursor() as cur:

            async def running() -> bool:
                await cur.execute(
                    "SELECT command FROM information_schema.processlist WHERE id = %s", (thread,)
                )
                row = await cur.fetchone()
                return row is not None and row[0] == "Query"

            async def cancel() -> None:
                await cur.execute(f"KILL QUERY {thread}")

            await _until_stopped(running, cancel)

    async def execute(self, conn: aiomysql.Connection, statement: Statement) -> RawResult:
        cur = await conn.cursor(aiomysql.SSCursor)
        try:
            if "mariadb" in conn.get_server_info().lower():
                await cur.execute(f"SET SESSION max_statement_time = {statement.timeout_s:.3f}")
            else:
                timeout_ms = int(statement.timeout_s * 1000)
                await cur.execute(f"SET SESSION max_execution_time = {timeout_ms}")
            await cur.execute(
                "START TRANSACTION READ ONLY" if statement.read_only else "START TRANSACTION"
            )
            await cur.execute(statement.checked.sql)
            columns = [str(d[0]) for d in cur.description or ()]
            if statement.checked.kind == "write":
                rows = list(await cur.fetchall()) if columns else []
                affected = cur.rowcount
                await cur.execute("COMMIT")
                return RawResult(columns=columns, rows=rows, affected=affected)
            rows = list(await cur.fetchmany(statement.cap)) if columns else []
            if len(rows) >= statement.cap and await cur.fetchone() is not None:
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


@dataclass(kw_only=True)
class _SqliteSession:
    """Per-connection state: SQLite has no server, so the progress handler installed
    once per connection is the in-engine statement timeout."""

    read_only: bool
    deadline: float = math.inf
    cancelled: bool = False

    def past_deadline(self) -> int:
        return 1 if self.cancelled or time.monotonic() > self.deadline else 0


_SQLITE_SESSIONS: weakref.WeakKeyDictionary[aiosqlite.Connection, _SqliteSession] = (
    weakref.WeakKeyDictionary()
)


async def _sqlite_session(conn: aiosqlite.Connection, *, read_only: bool) -> _SqliteSession:
    session = _SQLITE_SESSIONS.get(conn)
    if session is None or session.read_only != read_only:
        session = _SqliteSession(read_only=read_only)
        await conn.execute(f"PRAGMA query_only = {'ON' if read_only else 'OFF'}")
        await conn.set_progress_handler(session.past_deadline, _SQLITE_PROGRESS_OPS)
        _SQLITE_SESSIONS[conn] = session
    return session


class SqliteDriver(Driver):
    async def cancel(self, conn: aiosqlite.Connection, control: ControlConnection) -> None:
        session = _SQLITE_SESSIONS.get(conn)
        if session is not None:
            session.cancelled = True  # also stops a statement the worker has not begun yet
        await conn.interrupt()

    async def execute(self, conn: aiosqlite.Connection, statement: Statement) -> RawResult:
        session = await _sqlite_session(conn, read_only=statement.read_only)
        session.deadline = time.monotonic() + statement.timeout_s
        try:
            if (
                statement.read_only
                and statement.checked.kind != "write"
                and not conn.in_transaction
            ):
                # query_only is on for this connection (and read-only connectors open the
                # file with mode=ro): the statement's implicit transaction is read-only.
                return await self._read(conn, statement.checked.sql, statement.cap)
            return await self._run_in_transaction(conn, statement.checked, cap=statement.cap)
        except sqlite3.Error as exc:
            reusable = await _quietly(conn.rollback)
            if "interrupted" in str(exc):
                raise DriverTimeout(exc, reusable=reusable) from None
            raise DriverError(exc, reusable=reusable) from None
        finally:
            session.deadline = math.inf

    async def _read(self, conn: aiosqlite.Connection, sql: str, cap: int) -> RawResult:
        async with conn.execute(sql) as cur:
            columns = [str(d[0]) for d in cur.description or ()]
            rows = list(await cur.fetchmany(cap))
        return RawResult(columns=columns, rows=rows)

    async def _run_in_transaction(
        self, conn: aiosqlite.Connection, checked: CheckedSql, *, cap: int
    ) -> RawResult:
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
