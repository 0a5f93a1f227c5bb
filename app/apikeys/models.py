from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin


class ApiKey(IdMixin, TimestampMixin, Base):
    __tablename__ = "api_keys"

    name: Mapped[str] = mapped_column(String(128))
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    """SHA-256 of the key (keys are 256-bit random, so a fast hash is sufficient)."""
    prefix: Mapped[str] = mapped_column(String(16))
    scopes: Mapped[list[Any]] = mapped_column(default=list)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    agent_ids: Mapped[list[Any] | None] = mapped_column(default=None)
    """Agents this key may chat with (ids as strings); None = every agent."""
    rate_limit_per_minute: Mapped[int | None] = mapped_column(Integer, default=None)
    """Runs this key may start per minute (counted in the database); None = no limit."""
