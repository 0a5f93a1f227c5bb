"""The waiting point of human approval: one small interface, several decision sources.

The chat loop asks an `ApprovalGate` whenever a call must wait for a person. The gate
announces the request (through `on_open`, which the chat loop turns into an
`approval_requested` event) and returns the person's `Decision`. `StoredApprovalGate`
(app/approvals/stored.py) keeps requests as rows that any worker can decide; another
front end (for example an MCP client that supports elicitation) can implement the same
protocol and plug its own decision source in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

DEFAULT_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 86_400.0

Outcome = Literal["approve", "deny", "timeout", "cancelled"]


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """One call that waits: what the person is asked to approve."""

    call_id: str
    name: str
    """The tool name as the model called it."""
    target: str
    """What the call acts on, e.g. `connector:jira/create_issue` or `database:sales/query`."""
    arguments: dict[str, Any] | str
    """Already redacted: safe to store and to show."""
    reason: str
    """Why it waits (requires_confirmation, an approval glob, a database write)."""
    timeout_s: float


@dataclass(frozen=True, kw_only=True)
class Opened:
    """The request is visible to deciders (stored, shown, or sent)."""

    approval_id: str
    expires_at: datetime


@dataclass(frozen=True, kw_only=True)
class Decision:
    outcome: Outcome
    by: str | None = None
    reason: str | None = None

    @property
    def approved(self) -> bool:
        return self.outcome == "approve"

    def observation(self, timeout_s: float) -> str:
        """What the model reads when the call does not run."""
        if self.outcome == "timeout":
            return f"Approval timed out after {timeout_s:g} s"
        if self.outcome == "cancelled":
            return "The run was cancelled while this call waited for approval"
        return f"Denied by a person: {self.reason or 'no reason given'}"


class ApprovalGate(Protocol):
    async def request(
        self, request: ApprovalRequest, on_open: Callable[[Opened], None]
    ) -> Decision:
        """Make the request visible, call `on_open` once it is, and wait for the decision
        (or the timeout). Must not raise for a denial or a timeout."""
        ...
