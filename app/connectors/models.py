from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, IdMixin, JSONType, TimestampMixin, utcnow
from app.security.crypto import EncryptedJSON


class Connector(IdMixin, TimestampMixin, Base):
    __tablename__ = "connectors"

    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    base_url: Mapped[str] = mapped_column(String(2048))
    auth_type: Mapped[str] = mapped_column(String(16), default="none")
    auth_config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    credentials: Mapped[dict[str, Any] | None] = mapped_column(EncryptedJSON, default=None)
    timeout_s: Mapped[float] = mapped_column(Float, default=30.0)

    actions: Mapped[list[ConnectorAction]] = relationship(
        back_populates="connector",
        cascade="all, delete-orphan",
        lazy="raise",
        order_by="ConnectorAction.name",
    )


class ConnectorAction(IdMixin, TimestampMixin, Base):
    __tablename__ = "connector_actions"
    __table_args__ = (UniqueConstraint("connector_id", "name"),)

    connector_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("connectors.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="")
    method: Mapped[str] = mapped_column(String(8), default="GET")
    path: Mapped[str] = mapped_column(String(2048), default="/")
    parameters: Mapped[dict[str, Any]] = mapped_column(default=dict)
    body_template: Mapped[Any | None] = mapped_column(JSONType, default=None)
    requires_confirmation: Mapped[bool] = mapped_column(Boolean, default=False)

    connector: Mapped[Connector] = relationship(back_populates="actions", lazy="raise")


class ConnectorCall(IdMixin, Base):
    """Audit row per connector call (arguments redacted)."""

    __tablename__ = "connector_calls"

    connector_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("connectors.id", ondelete="SET NULL"), index=True, default=None
    )
    connector_name: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[dict[str, Any]] = mapped_column(default=dict)
    ok: Mapped[bool] = mapped_column(Boolean, default=False)
    status_code: Mapped[int | None] = mapped_column(Integer, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    run_id: Mapped[str | None] = mapped_column(String(64), index=True, default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
