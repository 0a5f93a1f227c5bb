"""The journal's writer on a SQLite store: a batch in one transaction, handed to a thread once.

Through the session path every cursor, statement, commit and connection reset is a hand-off to
aiosqlite's thread and back (about eight for an MCP call's events and audit row); here the
whole transaction runs in one thread of the writer's own, on a plain pysqlite connection with
the store's rules (`app/db/engine.py`), storing what the session path stores
(Core INSERTs compiled once, no unit of work: `repository.RawBatch`). Batches that
carry more than events and audit rows (a run's final state) take the session path.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.audit.record import AuditRow
from app.audit.sink import tool_call_values
from app.chat.repository import RawBatch
from app.config import Settings
from app.db.engine import create_sqlite_writer_engine


class SqliteJournal:
    def __init__(self, settings: Settings) -> None:
        self._engine = create_sqlite_writer_engine(settings)
        self._batch = RawBatch(self._engine.dialect)
        self._conn: Any = None
        """The writer thread's connection (the pool's, with the store's pragmas), kept."""
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quiver-journal")

    async def write(self, rows: list[dict[str, Any]], audit: Sequence[AuditRow]) -> None:
        """Store the events (`run_id`, `seq`, `kind`, `data` each) and audit rows, committed."""
        values = tool_call_values(audit)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._write, rows, values)

    def _write(self, rows: list[dict[str, Any]], audit: list[dict[str, Any]]) -> None:
        if self._conn is None:
            self._conn = self._engine.raw_connection()
        conn = self._conn
        try:
            self._batch.store(conn, rows, audit)
            conn.commit()
        except BaseException:
            self._close()  # rolled back; the next batch takes a fresh connection
            raise

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.rollback()
            conn.close()

    def _dispose(self) -> None:
        self._close()
        self._engine.dispose()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._dispose)
        self._thread.shutdown(wait=True)
