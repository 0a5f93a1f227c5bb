"""Turns one finished tool call into its audit row (arguments and error redacted)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from app.audit.models import ToolCall
from app.db.base import utcnow
from app.security.redact import redact, redact_text
from app.tools.base import CallContext, ToolDef, ToolResult

AUDIT_KINDS = ("connector", "database", "mcp", "skill", "knowledge", "agent", "builtin")
_ERROR_CHARS = 2000


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
) -> ToolCall:
    """`step` is the progress tracker's step id for the call (its target); without one, the
    result's step or the tool's own target. Built as the call ends: `created_at` is when it
    started (now less its latency), `call_id` the id its `tool_call` event carries."""
    step = step or result.step or (tool.target if tool is not None else None)
    args = redact(arguments) if isinstance(arguments, dict) else {"raw": redact(arguments)}
    error = redact_text(result.error or "error")[:_ERROR_CHARS] if not result.ok else None
    return ToolCall(
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
