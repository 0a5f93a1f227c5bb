"""Writes tool-call audit rows off the call path, in small batches (see `BatchSink`)."""

from __future__ import annotations

from typing import Protocol

from app.audit.models import ToolCall
from app.db.batch_sink import BatchSink


class ToolAuditBackend(Protocol):
    """What a run's tool phase calls to audit a call (implemented by `ToolCallSink`)."""

    def record(self, row: ToolCall) -> None: ...


class ToolCallSink(BatchSink[ToolCall]):
    label = "tool-call audit"

    async def store(self, batch: list[ToolCall]) -> None:
        await self.insert(batch)
