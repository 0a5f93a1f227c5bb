"""Audit rows for connector calls, written off the call path (see `BatchSink`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from app.connectors.models import ConnectorCall
from app.db.batch_sink import BatchSink


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


class AuditSink(BatchSink[AuditEntry]):
    label = "connector audit"

    async def store(self, batch: list[AuditEntry]) -> None:
        try:
            await self.insert([ConnectorCall(**vars(entry)) for entry in batch])
        except IntegrityError:
            # A connector deleted right after its call: keep the rows, without the link
            # (the name stays in `connector_name`), as ON DELETE SET NULL would have done.
            await self.insert(
                [ConnectorCall(**{**vars(entry), "connector_id": None}) for entry in batch]
            )
