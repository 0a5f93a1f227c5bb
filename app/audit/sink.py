"""Writes tool-call audit rows off the call path, in small batches.

`record()` only enqueues; a background task inserts batches in short transactions. A full
queue drops the row (and counts it) rather than slow the model's call; `aclose()` writes
what is left. Write failures are logged and counted, never raised into a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.models import ToolCall

logger = logging.getLogger(__name__)


class ToolAuditBackend(Protocol):
    """What a run's tool phase calls to audit a call (implemented by `ToolCallSink`)."""

    def record(self, row: ToolCall) -> None: ...


class ToolCallSink:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_queue: int = 10_000,
        batch_size: int = 200,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._queue: asyncio.Queue[ToolCall] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.dropped = 0
        self.written = 0
        self.failed = 0

    def record(self, row: ToolCall) -> None:
        """Queue one row; never blocks."""
        if self._closed:
            self.dropped += 1
            return
        try:
            self._queue.put_nowait(row)
        except asyncio.QueueFull:
            self.dropped += 1
            logger.warning("tool-call audit queue full; dropped a row")
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

    def _take(self) -> list[ToolCall]:
        batch: list[ToolCall] = []
        while len(batch) < self._batch_size and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _write(self, batch: list[ToolCall]) -> None:
        if not batch:
            return
        try:
            async with self._sessionmaker() as session:
                session.add_all(batch)
                await session.commit()
        except Exception:
            logger.exception("writing %d tool-call audit rows failed", len(batch))
            self.failed += len(batch)
            return
        self.written += len(batch)
