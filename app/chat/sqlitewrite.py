"""The journal's writer on a SQLite store: a batch in one transaction, handed to a thread once.

Through the session path every cursor, statement, commit and connection reset is a hand-off to
aiosqlite's thread and back (about eight for an MCP call's events and audit row); here the
whole transaction runs in one thread of the writer's own, on a plain pysqlite connection with
the store's rules (`app/db/engine.py`), storing what the session path stores
(`repository.store_batch`). Batches that carry more than events and audit rows (a run's final
state) take the session path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy.orm import Session

from app.audit.models import ToolCall
from app.chat.repository import store_batch
from app.config import Settings
from app.db.engine import create_sqlite_writer_engine


class SqliteJournal:
    def __init__(self, settings: Settings) -> None:
        self._engine = create_sqlite_writer_engine(settings)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quiver-journal")

    async def write(self, rows: list[dict[str, Any]], audit: Sequence[ToolCall]) -> None:
        """Store the events (`run_id`, `seq`, `kind`, `data` each) and audit rows, committed."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._write, rows, list(audit))

    def _write(self, rows: list[dict[str, Any]], audit: list[ToolCall]) -> None:
        with Session(self._engine, expire_on_commit=False) as session:
            store_batch(session, rows, audit)
            session.commit()

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self._engine.dispose)
        self._thread.shutdown(wait=True)
