"""`database query`: validate, then run inside a read-only transaction (docs/contract.md §7.2).

Errors reach the model as values with a typed prefix — `[SQL Safety Error]`, `[Timeout]`,
`[Database Error]` — and never carry the connector URL or its credentials.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped,unused-ignore]
from sqlalchemy.ext.asyncio import AsyncConnection

from app.databases.drivers import (
    DRIVERS,
    Driver,
    DriverError,
    DriverTimeout,
    RawResult,
    Statement,
)
from app.databases.engines import (
    MAX_OVERFLOW,
    MAX_TIMEOUT_S,
    POOL_SIZE,
    EngineCache,
    session_timeout,
)
from app.databases.models import DatabaseConnector
from app.databases.readonly import CheckedSql, SqlSafetyError, check_sql, dialect_from_url
from app.databases.values import clean_driver_message, json_rows
from app.errors import Invalid, QuiverError, Upstream
from app.tools.base import CallContext, ToolResult

logger = logging.getLogger(__name__)
READ_ATTEMPTS = POOL_SIZE + MAX_OVERFLOW + 1
MAX_ROWS_CEILING = 10_000
CLIENT_GRACE_S = 5.0
"""Client-side backstop beyond the server-side statement timeout."""
CANCEL_TIMEOUT_S = 5.0
"""Upper bound for sending the server-side cancel of an abandoned query."""
MAX_OUTPUT_CHARS = 16_000
MAX_CELL_CHARS = 1_000
_MYSQL_DISCONNECT_ERRNOS = frozenset({2006, 2013, 2055})


class QueryError(QuiverError):
    """A refused or failed query; `message` already carries the typed prefix."""

    prefix = "[Database Error]"
    retryable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"{self.prefix} {detail}")
        self.detail = detail


class QueryRefused(QueryError, Invalid):
    prefix = "[SQL Safety Error]"
    retryable = False


class QueryTimeout(QueryError):
    prefix = "[Timeout]"
    status_code = 504


class QueryFailed(QueryError, Upstream):
    prefix = "[Database Error]"


@dataclass(frozen=True, kw_only=True)
class QueryResult:
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool
    elapsed_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "columns": self.columns,
            "rows": self.rows,
            "row_count": self.row_count,
            "truncated": self.truncated,
            "elapsed_ms": self.elapsed_ms,
        }


def hidden_tables(database: DatabaseConnector) -> list[str]:
    """Names of tables an admin hid in the schema cache."""
    return [
        str(t["name"])
        for t in database.schema_cache or []
        if isinstance(t, dict) and t.get("hidden") and t.get("name")
    ]


class DatabaseExecutor:
    """The `DatabaseBackend` for the database meta-tool and legacy `{db}__query` tools."""

    def __init__(self, engines: EngineCache, *, max_output_chars: int = MAX_OUTPUT_CHARS) -> None:
        self._engines = engines
        self._max_output_chars = max_output_chars

    async def query(self, database: DatabaseConnector, sql: str, ctx: CallContext) -> ToolResult:
        """Run `sql` for the model; every failure becomes a typed `ToolResult.fail`.

        A write (allowed only on a `read_only: false` database) runs only once a person
        approved the call: before that, nothing reaches the database."""
        try:
            if not ctx.approved and self._is_write(database, sql):
                return ToolResult.needs_approval(
                    f"a write to database {database.name!r} ({sql_verb(sql)})"
                )
            result = await self.run_query(database, sql)
        except QueryError as exc:
            return ToolResult.fail(exc.message, retryable=exc.retryable)
        except Exception as exc:  # the backend never raises into the run loop
            detail = clean_driver_message(exc, database.url)
            return ToolResult.fail(f"[Database Error] {detail}", retryable=True)
        return ToolResult.success(render_for_model(result, max_chars=self._max_output_chars))

    @staticmethod
    def _is_write(database: DatabaseConnector, sql: str) -> bool:
        if database.read_only:
            return False
        try:
            checked = check_sql(
                sql,
                dialect=database.dialect,
                hidden_tables=hidden_tables(database),
                read_only=False,
            )
        except SqlSafetyError:
            return False  # refused below, with the reason
        return checked.kind == "write"

    async def run_query(
        self,
        database: DatabaseConnector,
        sql: str,
        *,
        max_rows: int | None = None,
        timeout_s: float | None = None,
    ) -> QueryResult:
        """Validate and execute; raises QueryRefused, QueryTimeout or QueryFailed."""
        try:
            checked = check_sql(
                sql,
                dialect=database.dialect,
                hidden_tables=hidden_tables(database),
                read_only=database.read_only,
            )
        except SqlSafetyError as exc:
            raise QueryRefused(str(exc)) from None
        if _url_dialect(database.url) != database.dialect:
            raise QueryFailed("the connector's dialect does not match its URL; update the URL")
        limit = min(max_rows or database.max_rows or 1000, MAX_ROWS_CEILING)
        timeout = min(float(timeout_s), MAX_TIMEOUT_S) if timeout_s else session_timeout(database)
        started = time.perf_counter()
        raw = await self._execute(database, checked, max_rows=limit, timeout_s=timeout)
        elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
        truncated = len(raw.rows) > limit
        rows = json_rows(
            raw.rows[:limit] if truncated else raw.rows, typed=database.dialect != "sqlite"
        )
        return QueryResult(
            columns=raw.columns,
            rows=rows,
            row_count=len(rows) if raw.affected is None else raw.affected,
            truncated=truncated,
            elapsed_ms=elapsed_ms,
        )

    async def _execute(
        self, database: DatabaseConnector, checked: CheckedSql, *, max_rows: int, timeout_s: float
    ) -> RawResult:
        driver = DRIVERS[database.dialect]
        statement = Statement(
            checked=checked,
            read_only=database.read_only,
            cap=max_rows + 1,
            timeout_s=timeout_s,
            session_timeout_s=session_timeout(database),
        )
        # A read that meets a connection the server dropped is retried on the next one; every
        # idle pooled connection may be dead after a server restart, so up to the pool's size.
        attempts = 1 if checked.kind == "write" else READ_ATTEMPTS
        for attempt in range(1, attempts + 1):
            try:
                engine = await self._engines.get(database)
                async with engine.connect() as conn:
                    return await _run_guarded(conn, driver, statement)
            except DriverTimeout:
                raise QueryTimeout(
                    f"the query ran longer than {timeout_s:g}s and was cancelled; "
                    "narrow it (filters, LIMIT, fewer joins, smaller ranges)"
                ) from None
            except DriverError as exc:
                if attempt < attempts and _is_disconnect(exc.original):
                    continue
                raise QueryFailed(clean_driver_message(exc, database.url)) from None
            except Exception as exc:
                # A pooled connection the server dropped (discarded by `_run_guarded`).
                if attempt < attempts and _is_disconnect(exc):
                    continue
                raise QueryFailed(clean_driver_message(exc, database.url)) from None
        raise AssertionError("unreachable")


def _url_dialect(url: str) -> str | None:
    try:
        return dialect_from_url(url)
    except ValueError:
        return None


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | asyncpg.InterfaceError):
        return True
    if isinstance(exc, asyncpg.PostgresConnectionError):
        return True  # class 08, e.g. closed mid-operation after the server's FATAL goodbye
    if isinstance(exc, asyncpg.exceptions.InternalClientError):
        # The server's unsolicited goodbye (FATAL on an idle connection) arrived before its
        # close: the driver's protocol is stuck consuming it, and the connection is dead.
        return True
    errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    return errno in _MYSQL_DISCONNECT_ERRNOS


async def _run_guarded(conn: AsyncConnection, driver: Driver, statement: Statement) -> RawResult:
    """Run on the pooled connection's native driver; discard it if its state is unknown."""
    raw_conn = await conn.get_raw_connection()
    native = raw_conn.driver_connection
    try:
        async with asyncio.timeout(statement.timeout_s + CLIENT_GRACE_S):
            result = await driver.execute(native, statement)
    except DriverError as exc:
        if not exc.reusable:
            await conn.invalidate()
        raise
    except TimeoutError:
        await conn.invalidate()
        raise DriverTimeout(TimeoutError("client-side timeout"), reusable=False) from None
    except asyncio.CancelledError:
        # The caller went away (a cancelled run): stop the statement on the server too.
        await _cancel_statement(conn, driver, native)
        await conn.invalidate()
        raise
    except BaseException:
        await conn.invalidate()
        raise
    if result.dirty:
        await conn.invalidate()
    return result


async def _cancel_statement(conn: AsyncConnection, driver: Driver, native: Any) -> None:
    """Best effort, bounded: a failure is logged; the connection is discarded either way."""

    @asynccontextmanager
    async def control() -> AsyncIterator[Any]:
        async with conn.engine.connect() as other:
            raw = await other.get_raw_connection()
            yield raw.driver_connection

    try:
        async with asyncio.timeout(CANCEL_TIMEOUT_S):
            await driver.cancel(native, control)
    except Exception as exc:
        logger.warning("could not cancel a running query server-side: %s", type(exc).__name__)


def render_for_model(result: QueryResult, *, max_chars: int = MAX_OUTPUT_CHARS) -> str:
    """Compact JSON of the result; rows are dropped from the end to fit `max_chars`."""
    rows = [[_clip(v) for v in row] for row in result.rows]
    body = {**result.to_dict(), "rows": rows}
    if result.truncated:
        body["note"] = (
            f"stopped at {result.row_count} rows (the connector's max_rows); aggregate, "
            "filter or add LIMIT/OFFSET"
        )
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text) <= max_chars:
        return text
    budget = max_chars - 400
    kept: list[list[Any]] = []
    used = 0
    for row in rows:
        cost = len(json.dumps(row, separators=(",", ":"), ensure_ascii=False, default=str)) + 1
        if used + cost > budget:
            break
        kept.append(row)
        used += cost
    body["rows"] = kept
    body["truncated"] = True
    body["note"] = (
        f"showing {len(kept)}/{len(rows)} rows (output limit); select fewer columns, "
        "aggregate, or add LIMIT/OFFSET to page"
    )
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_CELL_CHARS:
        return f"{value[:MAX_CELL_CHARS]}…[+{len(value) - MAX_CELL_CHARS} chars]"
    return value


def sql_verb(sql: str) -> str:
    """The statement's first keyword (INSERT, UPDATE, …) for the approval request."""
    words = sql.split(None, 1)
    return words[0].upper()[:16] if words else "?"
