"""One pooled async engine per database connector, owned by the app lifespan.

Engines are keyed by connector id and a fingerprint of (URL, read_only, timeout), so an
update that changes any of them produces a fresh engine and the old pool is disposed. Sessions are
hardened at connect time: read-only connectors default every transaction to read-only,
MySQL connections refuse multi-statement strings, and the string-literal rules the
validator assumes (standard-conforming strings, backslash escapes) are pinned.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import quote

import aiomysql
from pymysql.constants import CLIENT, FIELD_TYPE  # type: ignore[import-untyped,unused-ignore]
from pymysql.converters import conversions  # type: ignore[import-untyped,unused-ignore]
from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.databases.models import DatabaseConnector
from app.databases.readonly import dialect_from_url
from app.databases.values import number_from_text
from app.security.db_url import parse_database_url

POOL_SIZE = 5
MAX_OVERFLOW = 5
POOL_RECYCLE_S = 600
CONNECT_TIMEOUT_S = 10.0
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 300.0

# MySQL: ANSI_QUOTES / NO_BACKSLASH_ESCAPES change how literals tokenize; the validator
# assumes MySQL's defaults, so remove both from whatever the server configured.
_MYSQL_SQL_MODE = (
    "SET SESSION sql_mode = TRIM(BOTH ',' FROM REPLACE(REPLACE(REPLACE(CONCAT(',', "
    "@@SESSION.sql_mode, ','), ',ANSI_QUOTES,', ','), ',NO_BACKSLASH_ESCAPES,', ','), "
    "',ANSI,', ','))"
)


class EngineCache:
    """Per-connector `AsyncEngine`s, created lazily and disposed on update/delete/shutdown."""

    def __init__(self, *, pool_size: int = POOL_SIZE, max_overflow: int = MAX_OVERFLOW) -> None:
        self._pool_size = pool_size
        self._max_overflow = max_overflow
        self._engines: dict[uuid.UUID, tuple[tuple[str, bool, float], AsyncEngine]] = {}
        self._lock = asyncio.Lock()

    async def get(self, db: DatabaseConnector) -> AsyncEngine:
        """The engine for `db`, replacing a cached one whose URL or mode changed."""
        fingerprint = _fingerprint(db)
        cached = self._engines.get(db.id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        async with self._lock:
            cached = self._engines.get(db.id)
            if cached is not None and cached[0] == fingerprint:
                return cached[1]
            engine = build_engine(
                db.url,
                read_only=db.read_only,
                statement_timeout_s=session_timeout(db),
                pool_size=self._pool_size,
                max_overflow=self._max_overflow,
            )
            self._engines[db.id] = (fingerprint, engine)
        if cached is not None:
            await cached[1].dispose()
        return engine

    async def dispose(self, db_id: uuid.UUID) -> None:
        """Close the pool of one connector (after update or delete)."""
        async with self._lock:
            cached = self._engines.pop(db_id, None)
        if cached is not None:
            await cached[1].dispose()

    async def aclose(self) -> None:
        """Close every pool (app shutdown)."""
        async with self._lock:
            engines = [engine for _, engine in self._engines.values()]
            self._engines.clear()
        for engine in engines:
            await engine.dispose()

    def __len__(self) -> int:
        return len(self._engines)


def _fingerprint(db: DatabaseConnector) -> tuple[str, bool, float]:
    """What an engine is built from; any change means a new engine (and pool)."""
    return (db.url, bool(db.read_only), session_timeout(db))


def session_timeout(db: DatabaseConnector) -> float:
    """The statement timeout sessions of `db` are opened with (seconds)."""
    return min(float(db.query_timeout_s or DEFAULT_TIMEOUT_S), MAX_TIMEOUT_S)


def build_engine(
    url: str,
    *,
    read_only: bool,
    statement_timeout_s: float = DEFAULT_TIMEOUT_S,
    pool_size: int = POOL_SIZE,
    max_overflow: int = MAX_OVERFLOW,
) -> AsyncEngine:
    """Create a pooled engine for a connector URL (no connection is opened yet)."""
    dialect = dialect_from_url(url)
    if dialect == "sqlite":
        return create_async_engine(_sqlite_url(url, read_only=read_only), pool_reset_on_return=None)
    pool: dict[str, Any] = {
        "pool_size": pool_size,
        "max_overflow": max_overflow,
        "pool_recycle": POOL_RECYCLE_S,
        # No pre-ping round trip per query: the executor retries a read once on a dropped
        # connection instead.
        "pool_pre_ping": False,
        # The drivers end every transaction they open (or discard the connection), so the
        # pool's rollback-on-return would be one more round trip for nothing.
        "pool_reset_on_return": None,
    }
    parsed = parse_database_url(url)
    if dialect == "postgresql":
        settings = {
            "application_name": "quiver",
            "standard_conforming_strings": "on",
            "statement_timeout": str(max(1, int(statement_timeout_s * 1000))),
        }
        if read_only:
            settings["default_transaction_read_only"] = "on"
        engine = create_async_engine(
            parsed.set(drivername="postgresql+asyncpg"),
            connect_args={"server_settings": settings, "timeout": CONNECT_TIMEOUT_S},
            **pool,
        )
        event.listen(engine.sync_engine, "connect", _install_pg_text_codecs)
        return engine
    return create_async_engine(
        "mysql+aiomysql://",
        async_creator=_mysql_creator(parsed, read_only=read_only),
        **pool,
    )


def _sqlite_url(url: str, *, read_only: bool) -> str:
    path = url.partition(":///")[2].partition("?")[0]
    if not read_only or path in ("", ":memory:"):
        return f"sqlite+aiosqlite:///{path}"
    # Read-only connectors open the file with mode=ro: writes fail in SQLite itself.
    return f"sqlite+aiosqlite:///file:{quote(path)}?mode=ro&uri=true"


_PG_TEXT_TYPES = (
    "date", "time", "timetz", "timestamp", "timestamptz", "interval", "uuid", "bit", "varbit",
    "point", "line", "lseg", "box", "path", "polygon", "circle", "macaddr", "macaddr8",
)  # fmt: skip


def _install_pg_text_codecs(dbapi_connection: Any, _record: Any) -> None:
    """Decode numbers, times and UUIDs from their text form: JSON-ready without a
    Python object per value (the executor returns them as JSON anyway)."""

    async def install(conn: Any) -> None:
        await conn.set_type_codec(
            "numeric", schema="pg_catalog", format="text", encoder=str, decoder=number_from_text
        )
        for name in _PG_TEXT_TYPES:
            await conn.set_type_codec(
                name, schema="pg_catalog", format="text", encoder=str, decoder=str
            )

    dbapi_connection.run_async(install)


def _mysql_conversions() -> dict[Any, Any]:
    conv = dict(conversions)
    conv[FIELD_TYPE.DECIMAL] = number_from_text
    conv[FIELD_TYPE.NEWDECIMAL] = number_from_text
    for field in (FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.DATE, FIELD_TYPE.TIME):
        conv[field] = str
    return conv


_MYSQL_CONV = _mysql_conversions()


def _mysql_creator(url: URL, *, read_only: bool) -> Any:
    query = dict(url.query)
    charset = str(query.get("charset", "utf8mb4"))

    async def connect() -> aiomysql.Connection:
        conn = aiomysql.Connection(
            host=url.host or "localhost",
            port=url.port or 3306,
            user=url.username or "",
            password=url.password or "",
            db=url.database,
            charset=charset,
            connect_timeout=CONNECT_TIMEOUT_S,
            autocommit=False,
            local_infile=False,
            conv=_MYSQL_CONV,
        )
        # aiomysql always asks for CLIENT_MULTI_STATEMENTS; without it the server itself
        # rejects `a; b`, a layer under the validator's one-statement rule.
        conn.client_flag &= ~CLIENT.MULTI_STATEMENTS
        try:
            # Inside the try: aiomysql closes its socket on a failed connect only for
            # `Exception`, so a connect cancelled by a run's cancel would leave it open.
            await conn._connect()
            async with conn.cursor() as cur:
                await cur.execute(_MYSQL_SQL_MODE)
                if read_only:
                    await cur.execute("SET SESSION TRANSACTION READ ONLY")
        except BaseException:
            conn.close()
            raise
        return conn

    return connect
