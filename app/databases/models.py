from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin
from app.security.crypto import EncryptedStr


class DatabaseConnector(IdMixin, TimestampMixin, Base):
    __tablename__ = "database_connectors"

    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    url: Mapped[str] = mapped_column(EncryptedStr)
    dialect: Mapped[str] = mapped_column(String(16))
    """postgresql | mysql | sqlite (derived from the URL on write)."""
    read_only: Mapped[bool] = mapped_column(Boolean, default=True)
    max_rows: Mapped[int] = mapped_column(Integer, default=1000)
    query_timeout_s: Mapped[float] = mapped_column(Float, default=30.0)
    schema_cache: Mapped[list[Any]] = mapped_column(default=list)
    """Tables: [{name, description, hidden, columns: [{name, type, nullable, primary_key,
    description}]}]."""
    introspected_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
