from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, StringConstraints

from app.approvals.schemas import ApprovalRead
from app.kit.schemas import ReadSchema, Schema


class ChatRequest(Schema):
    agent_id: uuid.UUID
    message: Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
    conversation_id: uuid.UUID | None = None
    user: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    """The end user of a frontend that shares one key; the conversation becomes theirs."""


class MessageRead(Schema):
    model_config = Schema.model_config | {"extra": "ignore"}
    seq: int
    role: str
    content: str | None
    tool_calls: list[Any] | None
    tool_call_id: str | None
    name: str | None
    run_id: uuid.UUID | None
    created_at: datetime


class AgentRef(Schema):
    """The agent a run or conversation belongs to; history outlives it (`deleted: true`, its
    name kept)."""

    id: uuid.UUID
    name: str | None
    """None only for an agent deleted before Quiver kept the names of deleted agents."""
    deleted: bool = False


class RunSummary(ReadSchema):
    status: str
    iterations: int
    usage: dict[str, Any]
    error: dict[str, Any] | None
    finished_at: datetime | None


class ConversationRead(ReadSchema):
    agent_id: uuid.UUID
    agent: AgentRef
    title: str
    api_key_id: uuid.UUID | None
    user: str | None
    messages: list[MessageRead]
    runs: list[RunSummary]


class CancelResult(Schema):
    run_id: uuid.UUID
    status: str
    cancel_requested: bool


class RunRead(ReadSchema):
    """A run as the operator routes show it."""

    conversation_id: uuid.UUID
    agent_id: uuid.UUID
    agent: AgentRef
    """The agent's name, and whether it was deleted since (its runs stay readable)."""
    kind: str = "chat"
    """chat, or mcp_session (the tool calls of one MCP session)."""
    status: str
    started_at: datetime
    finished_at: datetime | None
    iterations: int
    usage: dict[str, Any]
    reason: str | None
    """Why it stopped (progress tracker), or the failure's message."""
    escalated: bool
    error: dict[str, Any] | None
    cancel_requested: bool
    api_key_id: uuid.UUID | None
    user: str | None
    parent_run_id: uuid.UUID | None = None
    """The run whose `call_agent` started this one (a delegation)."""
    pending_approvals: list[ApprovalRead] = Field(default_factory=list)
    """Calls waiting for a person (filled by `GET /api/v1/runs/{id}`)."""


class ConversationSummary(ReadSchema):
    agent_id: uuid.UUID
    agent: AgentRef
    title: str
    api_key_id: uuid.UUID | None
    user: str | None
