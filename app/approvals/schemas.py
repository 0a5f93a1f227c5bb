"""Request and response bodies of the approval routes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import StringConstraints

from app.kit.schemas import ReadSchema, Schema


class ApprovalDecide(Schema):
    decision: Literal["approve", "deny"]
    reason: Annotated[str, StringConstraints(max_length=2000)] | None = None


class ApprovalRead(ReadSchema):
    run_id: uuid.UUID
    call_id: str
    name: str
    target: str
    arguments: dict[str, Any] | str
    """Redacted."""
    reason: str
    """Why the call waits."""
    status: str
    """pending | approved | denied | expired | cancelled."""
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    decision_reason: str | None
