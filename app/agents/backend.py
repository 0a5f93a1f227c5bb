"""What the tool pipeline calls to delegate a task to another agent (implemented by
`chat/delegation.py`: a child run of the caller's run)."""

from __future__ import annotations

from typing import Protocol

from app.agents.models import Agent
from app.tools.base import CallContext, ToolResult


class DelegationBackend(Protocol):
    async def delegate(self, delegate: Agent, task: str, ctx: CallContext) -> ToolResult:
        """Run `delegate` on `task` as a child of `ctx.run_id`; the result is its final
        answer only. Refusals (depth, cycle, access) and failures are `ToolResult.fail`."""
        ...
