from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, DateTime, Float, Index, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, utcnow


class ToolCall(IdMixin, Base):
    """Audit row per tool call (arguments redacted). Kept when its run is deleted."""

    __tablename__ = "tool_calls"
    __table_args__ = (
        # An agent's most recent calls: the co-use prior of runtime selection (pipeline/couse.py).
        Index("ix_tool_calls_agent_id_created_at", "agent_id", "created_at"),
    )

    run_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True, default=None)
    call_id: Mapped[str | None] = mapped_column(String(128), default=None)
    """The call's id in its run (`tool_call`/`tool_result` events); None for older rows."""
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True, default=None)
    user: Mapped[str | None] = mapped_column(String(256), default=None)
    agent_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, default=None)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    """connector | database | mcp | skill | agent (`call_agent`) | builtin."""
    name: Mapped[str] = mapped_column(String(128), index=True)
    """The tool name the model called."""
    target: Mapped[str | None] = mapped_column(String(256), default=None)
    """What it reached, e.g. `connector:jira/create_issue` (meta-tools name their target)."""
    arguments: Mapped[dict[str, Any]] = mapped_column(default=dict)
    ok: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, index=True
    )
    """When the call started (rows are written in batches, after the call)."""


class DeletedResource(Base):
    """A deleted agent, connector, database or MCP server, as its history shows it: runs,
    conversations and audit rows outlive the resource (only deleting a conversation, or the
    retention setting, removes history)."""

    __tablename__ = "deleted_resources"
    __table_args__ = (Index("ix_deleted_resources_kind_name", "kind", "name"),)

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    """The resource's own id."""
    kind: Mapped[str] = mapped_column(String(16))
    """agent | connector | database | mcp (the audit kinds)."""
    name: Mapped[str] = mapped_column(String(256))
    deleted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
