"""Turns one finished tool call into its audit row (arguments and error redacted)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from app.audit.models import ToolCall
from app.db.base import utcnow
from app.security.redact import redact, redact_text
from app.tools.base import CallContext, ToolDef, ToolResult

AUDIT_KINDS = ("connector", "database", "mcp", "skill", "knowledge", "agent", "builtin")
_ERROR_CHARS = 2000


@dataclass(slots=True, kw_only=True)
class AuditRow:
    """One `tool_calls` row as plain values, built as the call ends.

    The row is made on the call's own path (an MCP endpoint call's answer waits for the write
    that carries it), where an ORM object would cost ~18 µs to make and more to read back; it
    is stored as arrays (Postgres), as column values (the SQLite journal) or as a `ToolCall`
    (`to_orm`, the other stores). `id` is set once, before its first write (`with_id`): a
    batch sent again after a dropped connection stores it once (`ON CONFLICT (id)`).
    """

    run_id: uuid.UUID | None
    call_id: str | None
    api_key_id: uuid.UUID | None
    user: str | None
    agent_id: uuid.UUID | None
    kind: str
    name: str
    target: str | None
    arguments: dict[str, Any]
    ok: bool
    error: str | None
    latency_ms: float
    created_at: datetime
    id: uuid.UUID | None = None

    def with_id(self) -> AuditRow:
        if self.id is None:
            self.id = uuid.uuid4()
        return self

    def values(self) -> dict[str, Any]:
        """Column name → value (its `id` set)."""
        self.with_id()
        return {name: getattr(self, name) for name in COLUMNS}

    def to_orm(self) -> ToolCall:
        return ToolCall(**self.values())


COLUMNS = tuple(f.name for f in fields(AuditRow))


def _uuid(value: str | None) -> uuid.UUID | None:
    if not value:
        return None
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def audit_kind(tool: ToolDef | None, step: str | None) -> str:
    """The resource kind a call reached: a meta-tool's step names its target
    (`connector:jira/create_issue`); `request_tools` and unknown names count as builtin."""
    prefix = (step or "").partition(":")[0]
    if prefix in AUDIT_KINDS:
        return prefix
    kind = tool.kind if tool is not None else "builtin"
    return kind if kind in AUDIT_KINDS else "builtin"


def tool_call_row(
    *,
    call_id: str | None,
    name: str,
    arguments: Any,
    tool: ToolDef | None,
    step: str | None,
    result: ToolResult,
    ctx: CallContext,
    latency_ms: float,
) -> AuditRow:
    """`step` is the progress tracker's step id for the call (its target); without one, the
    result's step or the tool's own target. Built as the call ends: `created_at` is when it
    started (now less its latency), `call_id` the id its `tool_call` event carries."""
    step = step or result.step or (tool.target if tool is not None else None)
    args = redact(arguments) if isinstance(arguments, dict) else {"raw": redact(arguments)}
    error = redact_text(result.error or "error")[:_ERROR_CHARS] if not result.ok else None
    return AuditRow(
        call_id=call_id[:128] if call_id else None,
        created_at=utcnow() - timedelta(milliseconds=latency_ms),
        run_id=_uuid(ctx.run_id),
        api_key_id=_uuid(ctx.api_key_id),
        user=ctx.user,
        agent_id=_uuid(ctx.agent_id),
        kind=audit_kind(tool, step),
        name=name[:128],
        target=step[:256] if step else None,
        arguments=args,
        ok=result.ok,
        error=error,
        latency_ms=round(latency_ms, 3),
    )
