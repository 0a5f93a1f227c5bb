"""The journal's writer on a SQLite store: a batch in one transaction, handed to a thread once.

Through the session path every cursor, statement, commit and connection reset is a hand-off to
aiosqlite's thread and back (about eight for an MCP call's events and audit row); here the
whole transaction runs in one thread of the writer's own, on a plain pysqlite connection with
the store's rules (`app/db/engine.py`), storing what the session path stores
(`repository.store_batch`: Core INSERTs, no unit of work). Batches that carry more than
events and audit rows (a run's final state) take the session path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from app.audit.models import ToolCall
from app.audit.sink import tool_call_values
from app.chat.repository import store_batch
from app.config import Settings
from app.db.engine import create_sqlite_writer_engine


class SqliteJournal:
    def __init__(self, settings: Settings) -> None:
        self._engine = create_sqlite_writer_engine(settings)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quiver-journal")

    async def write(self, rows: list[dict[str, Any]], audit: Sequence[ToolCall]) -> None:
        """Store the events (`run_id`, `seq`, `kind`, `data` each) and audit rows, committed."""
        values = tool_call_values(audit)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._write, rows, values)

    def _write(self, rows: list[dict[str, Any]], audit: list[dict[str, Any]]) -> None:
        with self._engine.begin() as conn:
            store_batch(conn, rows, audit)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._engine.dispose)
        self._thread.shutdown(wait=True)
