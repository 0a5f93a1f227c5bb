"""Approvals are rows, so a decision can reach whichever worker runs the call."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, JSONType, TimestampMixin

STATUSES = ("pending", "approved", "denied", "expired", "cancelled")


class Approval(IdMixin, TimestampMixin, Base):
    __tablename__ = "approvals"

    run_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("runs.id", ondelete="CASCADE"), index=True
    )
    call_id: Mapped[str] = mapped_column(String(128))
    name: Mapped[str] = mapped_column(String(128))
    target: Mapped[str] = mapped_column(String(256))
    arguments: Mapped[Any] = mapped_column(JSONType, default=dict)
    """Redacted before storage."""
    reason: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), index=True, default="pending")
    """pending | approved | denied | expired | cancelled."""
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    decided_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    decided_by: Mapped[str | None] = mapped_column(String(320), default=None)
    decision_reason: Mapped[str | None] = mapped_column(Text, default=None)
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="SET NULL"), index=True, default=None
    )
    """The run's owner (copied from the run): who may decide besides an admin."""
    user: Mapped[str | None] = mapped_column(String(256), default=None)
