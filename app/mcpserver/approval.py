"""Human approval over MCP: the client's person decides through elicitation.

An MCP session has no chat stream a person watches, so a call that must wait for approval is
put to the MCP client as an `elicitation/create` request (form mode: approve yes/no and an
optional reason). A client that did not declare the elicitation capability cannot ask anyone:
such calls fail with a message that says where approval can be given instead.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import mcp_types as types

from app.approvals.gate import ApprovalRequest, Decision, Opened
from app.db.base import utcnow

NO_ELICITATION = (
    "This tool needs a person's approval; use the chat API or a client that supports elicitation"
)
_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {"type": "boolean", "title": "Approve this call?"},
        "reason": {"type": "string", "title": "Reason (optional)"},
    },
    "required": ["approve"],
}


def supports_elicitation(session: Any) -> bool:
    """Did the client declare the elicitation capability at `initialize`?"""
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    return bool(session.check_client_capability(wanted))


class ElicitationGate:
    """An `ApprovalGate` whose decider is the person behind the MCP client."""

    def __init__(
        self, session: Any, *, related_request_id: Any = None, by: str = "mcp-client"
    ) -> None:
        self.session = session
        self.related_request_id = related_request_id
        """The `tools/call` being decided: the question rides its response stream, so it
        reaches the client whichever worker serves the call (it may hold no `GET` stream)."""
        self.by = by

    async def request(
        self, request: ApprovalRequest, on_open: Callable[[Opened], None]
    ) -> Decision:
        on_open(
            Opened(
                approval_id=str(uuid.uuid4()),
                expires_at=utcnow() + timedelta(seconds=request.timeout_s),
            )
        )
        arguments = (
            request.arguments
            if isinstance(request.arguments, str)
            else json.dumps(request.arguments, ensure_ascii=False)
        )
        message = (
            f"Quiver asks for approval: {request.target or request.name} "
            f"with {arguments[:2000]} ({request.reason})"
        )
        try:
            async with asyncio.timeout(request.timeout_s):
                answer = await self.session.elicit(message, _SCHEMA, self.related_request_id)
        except TimeoutError:
            return Decision(outcome="timeout")
        content = answer.content or {}
        if answer.action == "accept" and content.get("approve") is True:
            return Decision(outcome="approve", by=self.by)
        reason = content.get("reason") if answer.action == "accept" else None
        if not reason:
            reason = "declined in the MCP client" if answer.action != "accept" else None
        return Decision(outcome="deny", by=self.by, reason=str(reason) if reason else None)
