"""Audit rows for connector calls, written off the call path.

`record()` only enqueues; a background task batches rows into short transactions. A full
queue drops the row (and counts it) rather than slowing the model's call; `aclose()`
flushes what is left. Failures to write are logged, never raised into a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.connectors.models import ConnectorCall

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class AuditEntry:
    connector_id: uuid.UUID | None
    connector_name: str
    action: str
    arguments: dict[str, Any]
    """Already redacted by the caller."""
    ok: bool
    status_code: int | None
    error: str | None
    latency_ms: float
    run_id: str | None


class AuditSink:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_queue: int = 10_000,
        batch_size: int = 200,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._queue: asyncio.Queue[AuditEntry] = asyncio.Queue(maxsize=max_queue)
        self._batch_size = batch_size
        self._task: asyncio.Task[None] | None = None
        self._inflight: asyncio.Future[None] | None = None
        self._closed = False
        self.dropped = 0
        self.written = 0
        self.failed = 0

    def record(self, entry: AuditEntry) -> None:
        """Queue one row; never blocks."""
        if self._closed:
            self.dropped += 1
            return
        try:
            self._queue.put_nowait(entry)
        except asyncio.QueueFull:
            self.dropped += 1
            logger.warning("connector audit queue full; dropped a row")
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def flush(self) -> None:
        """Write everything queued so far."""
        while not self._queue.empty():
            await self._write(self._take_batch())

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._inflight is not None:
            await self._inflight
        await self.flush()

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            batch = [first, *self._take_batch(limit=self._batch_size - 1)]
            # Shielded so that aclose() cancelling the loop never loses a batch mid-write.
            self._inflight = asyncio.ensure_future(self._write(batch))
            await asyncio.shield(self._inflight)

    def _take_batch(self, *, limit: int | None = None) -> list[AuditEntry]:
        batch: list[AuditEntry] = []
        cap = self._batch_size if limit is None else limit
        while len(batch) < cap and not self._queue.empty():
            batch.append(self._queue.get_nowait())
        return batch

    async def _write(self, batch: list[AuditEntry]) -> None:
        if not batch:
            return
        try:
            await self._insert([ConnectorCall(**vars(entry)) for entry in batch])
        except IntegrityError:
            # A connector deleted right after its call: keep the rows, without the link
            # (the name stays in `connector_name`), as ON DELETE SET NULL would have done.
            try:
                await self._insert(
                    [ConnectorCall(**{**vars(entry), "connector_id": None}) for entry in batch]
                )
            except Exception:
                self._lost(len(batch))
                return
        except Exception:
            self._lost(len(batch))
            return
        self.written += len(batch)

    async def _insert(self, rows: list[ConnectorCall]) -> None:
        async with self._sessionmaker() as session:
            session.add_all(rows)
            await session.commit()

    def _lost(self, count: int) -> None:
        logger.exception("writing %d connector audit rows failed", count)
        self.failed += count
