"""One plain asyncpg connection of a background writer's own (no ORM, no pool, no pre-ping).

Opened on first use and again after it broke: a statement interrupted by anything but the
server's own refusal (a dropped connection, a cancellation mid-statement) terminates it, so
it is never reused half-way through a statement. Callers decide whether to retry.
"""

from __future__ import annotations

from typing import Any

import asyncpg


class DedicatedConnection:
    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None

    async def execute(self, query: str, *args: Any) -> None:
        if self._conn is None or self._conn.is_closed():
            self._conn = await asyncpg.connect(self._dsn)
        try:
            await self._conn.execute(query, *args)
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
