from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Float, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin
from app.security.crypto import EncryptedJSON


class McpServer(IdMixin, TimestampMixin, Base):
    __tablename__ = "mcp_servers"

    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    transport: Mapped[str] = mapped_column(String(16))
    """stdio | sse | streamable_http."""
    command: Mapped[str | None] = mapped_column(String(1024), default=None)
    args: Mapped[list[Any]] = mapped_column(default=list)
    env: Mapped[dict[str, Any] | None] = mapped_column(EncryptedJSON, default=None)
    url: Mapped[str | None] = mapped_column(String(2048), default=None)
    headers: Mapped[dict[str, Any] | None] = mapped_column(EncryptedJSON, default=None)
    connect_timeout_s: Mapped[float] = mapped_column(Float, default=20.0)
    call_timeout_s: Mapped[float] = mapped_column(Float, default=60.0)
    tools_cache: Mapped[list[Any]] = mapped_column(default=list)
    """[{name, description, input_schema}]."""
    tools_refreshed_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), default=None
    )
