"""Rows written off the call path, in small batches (the audit sinks build on it).

`record()` only enqueues; a background task inserts batches in short transactions. A full
queue drops the row (and counts it) rather than slow the caller; `aclose()` writes what is
left. Write failures are logged and counted, never raised into the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import ClassVar, Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.base import Base

logger = logging.getLogger(__name__)
T = TypeVar("T")


class BatchSink(Generic[T]):
    label: ClassVar[str]
    """What the rows are, for log lines (`tool-call audit`)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_queue: int = 10_000,
        batch_size: int = 200,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._queue: asyncio.Queue[T] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0
        self.written = 0
        self.failed = 0

    async def store(self, batch: list[T]) -> None:
        """Write one batch; raising counts the batch as failed."""
        raise NotImplementedError

    async def insert(self, rows: Sequence[Base]) -> None:
        async with self._sessionmaker() as session:
            session.add_all(rows)
            await session.commit()

    def record(self, item: T) -> None:
        """Queue one row; never blocks."""
        if self._closed:
            self.dropped += 1
            return
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            logger.warning("%s queue full; dropped a row", self.label)
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        """Write everything queued so far, including a batch the writer is inserting now."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self._task)
        while not self._queue.empty():
            await self._write(self._take())

    async def aclose(self) -> None:
        self._closed = True
        await self.flush()
        self._task = None

    async def _run(self) -> None:
        # Ends when the queue is empty; `record()` starts a new one for the next row.
        while not self._queue.empty():
            await self._write(self._take())

    def _take(self) -> list[T]:
        batch: list[T] = []
        while len(batch) < self._batch_size and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _write(self, batch: list[T]) -> None:
        if not batch:
            return
        try:
            await self.store(batch)
        except Exception:
            logger.exception("writing %d %s rows failed", len(batch), self.label)
            self.failed += len(batch)
            return
        self.written += len(batch)
