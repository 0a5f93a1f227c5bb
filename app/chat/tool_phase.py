"""One turn's tool calls: run concurrently under a timeout, track progress, report events."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from app.agents.config import Approval, StepIteration
from app.approvals.gate import DEFAULT_TIMEOUT_S, ApprovalGate, ApprovalRequest, Opened
from app.approvals.policy import glob_reason
from app.audit.record import tool_call_row
from app.chat.steps import NextStep, RunAgain, Stopped
from app.events import (
    ApprovalRequested,
    ApprovalResolved,
    RunEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolsLoaded,
)
from app.llm.types import ChatMessage, ToolCallRequest
from app.pipeline.toolset import AssembledToolset
from app.reasoning.progress import ProgressTracker, Stop, step_id_for
from app.security.redact import redact, redact_text
from app.tools.backends import ToolAuditBackend
from app.tools.base import CallContext, ToolResult

Planned = tuple[ToolCallRequest, dict[str, Any] | None, str | None, str]
"""One call of the turn: the request, its parsed arguments or the parse error, its step."""


@dataclass
class ToolPhase:
    """Per-run state for tool execution: the progress tracker and skipped steps."""

    toolset: AssembledToolset
    ctx: CallContext
    timeout_s: float
    step_iteration: StepIteration | None
    tracker: ProgressTracker | None = None
    skipped: dict[str, str] = field(default_factory=dict)
    """step id → reason, for `skip_step`: later calls to that target are refused."""
    outcome: NextStep = field(default_factory=RunAgain)
    audit: ToolAuditBackend | None = None
    """Where every call's audit row goes (none in unit tests of the phase)."""
    approval: Approval | None = None
    """The agent's approval globs and timeout."""
    gate: ApprovalGate | None = None
    """Who decides calls that wait for a person (none: such calls fail)."""

    def __post_init__(self) -> None:
        if self.step_iteration is not None:
            self.tracker = ProgressTracker(self.step_iteration)

    def offered(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools to show the model: a tool whose whole target was skipped is withdrawn."""
        if not self.skipped:
            return tools
        defs = self.toolset.full_tools()
        kept = []
        for tool in tools:
            name = tool["function"]["name"]
            tool_def = defs.get(name)
            target = (tool_def.target if tool_def else "") or name
            if target not in self.skipped:
                kept.append(tool)
        return kept

    def _step(self, name: str, args: dict[str, Any]) -> str:
        tool = self.toolset.full_tools().get(name)
        if tool is None:
            return name
        return step_id_for(name, args, tool.kind, target=tool.target)

    async def _call(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        try:
            return await asyncio.wait_for(self.toolset.call(name, args, ctx), self.timeout_s)
        except TimeoutError:
            return ToolResult.fail(
                f"Tool {name!r} timed out after {self.timeout_s:g}s", retryable=True
            )

    async def _gated(
        self,
        call: ToolCallRequest,
        args: dict[str, Any],
        step: str,
        emit: Callable[[RunEvent], None],
    ) -> ToolResult:
        """Run the call; when it must wait for a person, ask the gate first (or, for an
        executor that answered `needs_approval`, after it), then run it approved once."""
        tool = self.toolset.full_tools().get(call.name)
        reason = glob_reason(self.approval, call.name, tool.kind if tool else "", args, step)
        if reason is None:
            result = await self._call(call.name, args, self.ctx)
            if result.approval is None:
                return result
            reason, step = result.approval, result.step or step
        if self.gate is None:
            return ToolResult.fail(
                f"{reason}; it needs a person's approval, which cannot be asked for here",
                step=step,
            )
        timeout_s = self.approval.timeout_s if self.approval else DEFAULT_TIMEOUT_S
        request = ApprovalRequest(
            call_id=call.id,
            name=call.name,
            target=step,
            arguments=redact(args),
            reason=reason,
            timeout_s=timeout_s,
        )

        ids: list[str] = []

        def opened(done: Opened) -> None:
            emit(
                ApprovalRequested(
                    approval_id=done.approval_id,
                    call_id=call.id,
                    name=call.name,
                    arguments=request.arguments,
                    expires_at=done.expires_at.isoformat(),
                )
            )
            ids.append(done.approval_id)

        decision = await self.gate.request(request, opened)
        emit(
            ApprovalResolved(
                approval_id=ids[0] if ids else "",
                decision=decision.outcome,
                by=decision.by,
                reason=decision.reason,
            )
        )
        if not decision.approved:
            return ToolResult.fail(decision.observation(timeout_s), step=step)
        result = await self._call(call.name, args, dataclasses.replace(self.ctx, approved=True))
        return result if result.step else dataclasses.replace(result, step=step)

    async def _run_one(
        self,
        index: int,
        call: ToolCallRequest,
        args: dict[str, Any] | None,
        error: str | None,
        step: str,
        emit: Callable[[RunEvent], None],
    ) -> tuple[int, ToolResult, float]:
        start = time.perf_counter()
        if error is not None:
            result = ToolResult.fail(error)
        elif step in self.skipped:
            result = ToolResult.fail(
                f"Step '{step}' was skipped for the rest of this run: {self.skipped[step]}"
            )
        else:
            result = await self._gated(call, args or {}, step, emit)
        elapsed_ms = (time.perf_counter() - start) * 1000
        if self.audit is not None:
            self.audit.record(
                tool_call_row(
                    name=call.name,
                    arguments=args if args is not None else call.arguments,
                    tool=self.toolset.full_tools().get(call.name),
                    step=result.step or step,
                    result=result,
                    ctx=self.ctx,
                    latency_ms=elapsed_ms,
                )
            )
        return index, result, elapsed_ms

    async def run(
        self, calls: list[ToolCallRequest], iteration: int, messages: list[ChatMessage]
    ) -> AsyncIterator[RunEvent]:
        """Yield tool_call events, then results as they complete; append observations in order."""
        self.outcome = RunAgain()
        planned: list[Planned] = []
        for call in calls:
            args: dict[str, Any] | None
            try:
                args, error = call.parse_arguments(), None
            except ValueError as exc:
                args, error = None, f"{exc}. Send the arguments as one JSON object."
            step = self._step(call.name, args or {})
            planned.append((call, args, error, step))
            yield ToolCallEvent(
                call_id=call.id,
                name=call.name,
                iteration=iteration,
                arguments=args if args is not None else call.arguments,
            )
        # Results and approval events arrive on one queue: a call that waits for a person
        # pauses alone while the turn's other calls finish and are reported.
        outbox: asyncio.Queue[RunEvent | tuple[int, ToolResult, float]] = asyncio.Queue()

        async def one(index: int, plan: Planned) -> None:
            started = time.perf_counter()
            call, args, error, step = plan
            try:
                outbox.put_nowait(
                    await self._run_one(index, call, args, error, step, outbox.put_nowait)
                )
            except Exception as exc:  # never leave the turn waiting for a lost result
                failed = ToolResult.fail(f"Tool call failed unexpectedly ({type(exc).__name__})")
                outbox.put_nowait((index, failed, (time.perf_counter() - started) * 1000))

        tasks = [asyncio.ensure_future(one(index, plan)) for index, plan in enumerate(planned)]
        results: dict[int, ToolResult] = {}
        try:
            while len(results) < len(tasks):
                item = await outbox.get()
                if not isinstance(item, tuple):
                    yield item
                    continue
                index, result, ms = item
                results[index] = result
                call = planned[index][0]
                yield ToolResultEvent(
                    call_id=call.id,
                    name=call.name,
                    ok=result.ok,
                    output=redact_text(result.output) if result.ok else "",
                    error=None if result.ok else redact_text(result.error or "error"),
                    duration_ms=round(ms, 2),
                )
                if result.loaded_tools:
                    yield ToolsLoaded(names=list(result.loaded_tools))
        finally:
            for task in tasks:
                task.cancel()
        for index, (call, _args, _error, step) in enumerate(planned):
            result = results[index]
            text = redact_text(result.text)
            stop = self._track(result, result.step or step)
            if stop is not None:
                action = (
                    self.step_iteration.on_limit_reached if self.step_iteration else "skip_step"
                )
                yield stop.event(action)
                if action == "skip_step":
                    self.skipped[stop.step_id] = stop.reason
                    text += f"\n[{stop.reason}. This step is skipped for the rest of the run.]"
                elif not isinstance(self.outcome, Stopped):  # the first stop of a turn wins
                    self.outcome = Stopped(
                        status="stopped", reason=stop.reason, escalated=action == "escalate"
                    )
            messages.append(ChatMessage.tool(call.id, text, name=call.name))

    def _track(self, result: ToolResult, step: str) -> Stop | None:
        # A skipped step already stopped once: its refusals (and a parallel call that failed
        # in the same turn) must not count again and re-emit `step_limit_reached`.
        if self.tracker is None or step in self.skipped:
            return None
        if result.ok:
            self.tracker.record_success(step)
            return None
        decision = self.tracker.record_failure(step, result.error or "")
        return decision if isinstance(decision, Stop) else None
