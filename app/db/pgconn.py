"""One plain asyncpg connection of a background writer's own (no ORM, no pool, no pre-ping).

Opened on first use and again after it broke: a statement interrupted by anything but the
server's own refusal (a dropped connection, a cancellation mid-statement) terminates it, so
it is never reused half-way through a statement. Callers decide whether to retry. Text
parameters go through `storable.params` (no NUL characters reach Postgres).
"""

from __future__ import annotations

from typing import Any

import asyncpg

from app.db import storable


class PgTarget(str):
    """An asyncpg DSN that knows whether it is a transaction pooler (`Settings.behind_pooler`):
    then connections to it keep no statement cache (nothing prepared outlives its use)."""

    pooled: bool = False

    @classmethod
    def of(cls, dsn: str, *, pooled: bool) -> PgTarget:
        target = cls(dsn)
        target.pooled = pooled
        return target

    @property
    def connect_options(self) -> dict[str, Any]:
        return {"statement_cache_size": 0} if self.pooled else {}


async def connect(dsn: str) -> asyncpg.Connection:
    options = dsn.connect_options if isinstance(dsn, PgTarget) else {}
    return await asyncpg.connect(str(dsn), **options)


class DedicatedConnection:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None

    async def execute(self, query: str, *args: Any) -> None:
        await self._run(query, args, fetch=False)

    async def fetchrow(self, query: str, *args: Any) -> asyncpg.Record | None:
        row: asyncpg.Record | None = await self._run(query, args, fetch=True)
        return row

    async def _run(self, query: str, args: tuple[Any, ...], *, fetch: bool) -> Any:
        if self._conn is None or self._conn.is_closed():
            self._conn = await connect(self._dsn)
        try:
            if fetch:
                return await self._conn.fetchrow(query, *storable.params(args))
            await self._conn.execute(query, *storable.params(args))
            return None
        except asyncpg.PostgresError:
            raise  # the server answered (refused it): the connection is fine, or known closed
        except BaseException:
            conn, self._conn = self._conn, None
            conn.terminate()  # broken, or interrupted mid-statement: never reused
            raise

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close(timeout=2)
            except Exception:
                conn.terminate()
