"""The run events of docs/contract.md §5: one closed union for the journal and for SSE."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    run_id: str
    conversation_id: str
    agent_id: str
    modes: dict[str, str]
    tools: list[str]


class PreHydrationComplete(_Event):
    kind: Literal["pre_hydration_complete"] = "pre_hydration_complete"
    references_found: int
    references_resolved: int
    references_failed: int
    total_tokens: int


class ToolSelection(_Event):
    kind: Literal["tool_selection"] = "tool_selection"
    strategy: str
    total: int
    selected: list[str]
    elapsed_ms: float


class ModelDelta(_Event):
    kind: Literal["model_delta"] = "model_delta"
    text: str


class ToolCallEvent(_Event):
    kind: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    iteration: int


class ToolResultEvent(_Event):
    kind: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    ok: bool
    output: str
    error: str | None
    duration_ms: float


class ToolsLoaded(_Event):
    kind: Literal["tools_loaded"] = "tools_loaded"
    names: list[str]


class StepLimitReached(_Event):
    kind: Literal["step_limit_reached"] = "step_limit_reached"
    step_id: str
    attempts: int
    reason: str
    action: str


class ApprovalRequested(_Event):
    kind: Literal["approval_requested"] = "approval_requested"
    approval_id: str
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    """Redacted, as every event."""
    expires_at: str
    """ISO 8601, UTC."""


class ApprovalResolved(_Event):
    kind: Literal["approval_resolved"] = "approval_resolved"
    approval_id: str
    decision: Literal["approve", "deny", "timeout", "cancelled"]
    by: str | None = None
    reason: str | None = None


class DelegationStarted(_Event):
    """`call_agent` started a child run of this one (its events replay at its own id)."""

    kind: Literal["delegation_started"] = "delegation_started"
    child_run_id: str
    agent: str
    """The delegate agent's name."""


class DelegationFinished(_Event):
    kind: Literal["delegation_finished"] = "delegation_finished"
    child_run_id: str
    status: Literal["completed", "max_iterations", "stopped", "cancelled", "failed", "timeout"]
    """The child run's end (`timeout`: stopped after the delegation timeout)."""
    usage: dict[str, int] = Field(default_factory=dict)
    """The child's token usage (its own delegations included); summed into the parent's."""


class ContextCompacted(_Event):
    kind: Literal["context_compacted"] = "context_compacted"
    before_tokens: int
    after_tokens: int
    cleared: list[str]


class MessageEvent(_Event):
    kind: Literal["message"] = "message"
    content: str


class RunFinished(_Event):
    kind: Literal["run_finished"] = "run_finished"
    status: Literal["completed", "max_iterations", "stopped", "cancelled"]
    iterations: int
    usage: dict[str, int]
    elapsed_ms: float
    reason: str | None = None
    """Why the run stopped (progress tracker reason; flagged for a human on `escalate`)."""
    escalated: bool = False


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    code: str
    message: str


class RunFailed(_Event):
    kind: Literal["run_failed"] = "run_failed"
    error: ErrorInfo


RunEvent = Annotated[
    RunStarted
    | PreHydrationComplete
    | ToolSelection
    | ModelDelta
    | ToolCallEvent
    | ToolResultEvent
    | ToolsLoaded
    | StepLimitReached
    | ApprovalRequested
    | ApprovalResolved
    | DelegationStarted
    | DelegationFinished
    | ContextCompacted
    | MessageEvent
    | RunFinished
    | RunFailed,
    Field(discriminator="kind"),
]

RUN_EVENT_ADAPTER: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)
TERMINAL_KINDS = frozenset({"run_finished", "run_failed"})


def event_payload(event: RunEvent) -> dict[str, Any]:
    """The event's data without its `kind` (which is the SSE `event:` line)."""
    return event.model_dump(mode="json", exclude={"kind"})


def event_from_record(kind: str, data: dict[str, Any]) -> RunEvent:
    return RUN_EVENT_ADAPTER.validate_python({"kind": kind, **data})
