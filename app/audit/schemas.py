from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from app.kit.schemas import Schema


class ToolCallRead(Schema):
    id: uuid.UUID
    created_at: datetime
    """When the call started."""
    run_id: uuid.UUID | None
    call_id: str | None
    """The call's id in its run: its `tool_call` and `tool_result` events carry it."""
    api_key_id: uuid.UUID | None
    user: str | None
    agent_id: uuid.UUID | None
    kind: str
    name: str
    target: str | None
    target_deleted: bool = False
    """The resource the call reached (a connector, database, MCP server or agent) was
    deleted since; the call stays in the audit."""
    arguments: dict[str, Any]
    """Redacted."""
    ok: bool
    status: str
    """`ok` or `error`."""
    error: str | None
    latency_ms: float
