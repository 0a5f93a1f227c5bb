from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin, utcnow


class Conversation(IdMixin, TimestampMixin, Base):
    __tablename__ = "conversations"

    agent_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    """No foreign key: the conversation outlives its agent (a deleted agent's name is in
    `deleted_resources`); new conversations are stored only for an existing agent."""
    title: Mapped[str] = mapped_column(String(256), default="")
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="SET NULL"), index=True, default=None
    )
    """The key that created it: a chat key sees only its own conversations."""
    user: Mapped[str | None] = mapped_column(String(256), default=None)
    """The caller's optional end-user id; when set, requests must carry the same one."""


class Message(IdMixin, Base):
    """One chat message in OpenAI shape (incl. assistant tool calls and tool results)."""

    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("conversation_id", "seq"),)

    conversation_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    run_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, default=None)
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(Text, default=None)
    tool_calls: Mapped[list[Any] | None] = mapped_column(default=None)
    tool_call_id: Mapped[str | None] = mapped_column(String(128), default=None)
    name: Mapped[str | None] = mapped_column(String(128), default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


RUNNING_FILTER = text("status = 'running' AND parent_run_id IS NULL")
"""A delegation's child run shares its parent's conversation while both run."""


class Run(IdMixin, TimestampMixin, Base):
    __tablename__ = "runs"
    __table_args__ = (
        # One run in progress per conversation, enforced by the store (every worker, both stores).
        Index(
            "uq_runs_running_conversation",
            "conversation_id",
            unique=True,
            postgresql_where=RUNNING_FILTER,
            sqlite_where=RUNNING_FILTER,
        ),
    )

    conversation_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("conversations.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    """No foreign key: the run outlives its agent (see `Conversation.agent_id`)."""
    kind: Mapped[str] = mapped_column(String(16), default="chat", server_default="chat")
    """chat | mcp_session (one MCP session's tool calls, no model events)."""
    status: Mapped[str] = mapped_column(String(32), default="running")
    """running | completed | max_iterations | stopped | cancelled | failed."""
    iterations: Mapped[int] = mapped_column(Integer, default=0)
    usage: Mapped[dict[str, Any]] = mapped_column(default=dict)
    error: Mapped[dict[str, Any] | None] = mapped_column(default=None)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    api_key_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="SET NULL"), index=True, default=None
    )
    user: Mapped[str | None] = mapped_column(String(256), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    worker_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, default=None)
    """The gateway process executing the run (see `Worker`)."""
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    """An MCP session's run: until when `worker_id` holds the session (the database's clock);
    null once released. See `app/mcpserver/store.py`."""
    parent_run_id: Mapped[uuid.UUID | None] = mapped_column(
        Uuid, ForeignKey("runs.id", ondelete="CASCADE"), index=True, default=None
    )
    """The run whose `call_agent` started this one (a delegation); null for top-level runs."""


class RunEventRecord(Base):
    """The journal: every event of a run, in order."""

    __tablename__ = "run_events"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)
    """Also the index of every lookup by run (no index on `run_id` alone: 0008_journal_index)."""

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[uuid.UUID] = mapped_column(Uuid, ForeignKey("runs.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    data: Mapped[dict[str, Any]] = mapped_column(default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Worker(Base):
    """One gateway process that executes runs; it refreshes `heartbeat_at` while it lives.

    A run whose worker stopped beating is closed as `run_failed {code: run_lost}`.
    """

    __tablename__ = "workers"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    host: Mapped[str] = mapped_column(String(255), default="")
    pid: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
