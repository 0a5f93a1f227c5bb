"""One turn's tool calls: run concurrently under a timeout, track progress, report events.

Cancelling the run cancels the calls still in flight: each executor stops its work at the
other end (MCP `notifications/cancelled`, the database query cancelled server-side, the HTTP
request aborted), every unfinished call is answered with a cancelled observation, and the
turn ends the run as `cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from app.agents.config import Approval, StepIteration
from app.approvals.gate import DEFAULT_TIMEOUT_S, ApprovalGate, ApprovalRequest, Opened
from app.approvals.policy import glob_reason
from app.audit.record import tool_call_row
from app.audit.sink import ToolAuditBackend
from app.chat.steps import NextStep, PhaseResult, RunAgain, Stopped
from app.events import (
    ApprovalRequested,
    ApprovalResolved,
    RunEvent,
    ToolCallEvent,
    ToolResultEvent,
    ToolsLoaded,
)
from app.llm.types import ChatMessage, ToolCallRequest
from app.ops import tracing
from app.pipeline.toolset import AssembledToolset
from app.reasoning.progress import ProgressTracker, Stop, step_id_for
from app.security.redact import redact, redact_text
from app.tools.base import CallContext, ToolResult

CANCEL_GRACE_S = 0.75
"""How long a cancelled turn waits for its calls to stop their remote work; a call still
cleaning up after that finishes in the background."""
CANCELLED_ERROR = "Cancelled: the run was cancelled before this tool call finished"
Planned = tuple[ToolCallRequest, dict[str, Any] | None, str | None, str]
"""One call of the turn: the request, its parsed arguments or the parse error, its step."""
Finished = tuple[int, ToolResult, float]
"""A call's index in the turn, its result and its duration in ms."""


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
    audit: ToolAuditBackend | None = None
    """Where every call's audit row goes (none in unit tests of the phase)."""
    cancel: asyncio.Event | None = None
    """The run's cancel flag: once set, calls still in flight are cancelled."""
    approval: Approval | None = None
    """The agent's approval globs and timeout."""
    gate: ApprovalGate | None = None
    """Who decides calls that wait for a person (none: such calls fail)."""
    no_gate_error: str | None = None
    """What such a call answers when there is no gate (the front end's own advice)."""
    _waiting: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    """call id → approval id of the calls waiting for a person now."""

    def __post_init__(self) -> None:
        if self.step_iteration is not None:
            self.tracker = ProgressTracker(self.step_iteration)

    def offered(self) -> list[dict[str, Any]]:
        """The tools to show the model (OpenAI definitions): a tool whose whole target was
        skipped is withdrawn before its definition is converted."""
        return [
            tool.to_openai()
            for tool in self.toolset.tools
            if (tool.target or tool.name) not in self.skipped
        ]

    def _step(self, name: str, args: dict[str, Any]) -> str:
        tool = self.toolset.full_tools().get(name)
        if tool is None:
            return name
        return step_id_for(name, args, tool.kind, target=tool.target)

    async def _call(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tool = self.toolset.full_tools().get(name)
        timeout_s = tool.timeout_s if tool is not None and tool.timeout_s else self.timeout_s
        try:
            async with asyncio.timeout(timeout_s):  # in this task: `wait_for` would start one
                return await self.toolset.call(name, args, ctx)
        except TimeoutError:
            return ToolResult.fail(f"Tool {name!r} timed out after {timeout_s:g}s", retryable=True)

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
        ctx = dataclasses.replace(self.ctx, emit=emit)
        if reason is None:
            result = await self._call(call.name, args, ctx)
            if result.approval is None:
                return result
            reason, step = result.approval, result.step or step
        if self.gate is None:
            advice = (
                self.no_gate_error or "it needs a person's approval, which cannot be asked for here"
            )
            return ToolResult.fail(f"{advice} ({reason})", step=step)
        timeout_s = self.approval.timeout_s if self.approval else DEFAULT_TIMEOUT_S
        request = ApprovalRequest(
            call_id=call.id,
            name=call.name,
            target=step,
            arguments=redact(args),
            reason=reason,
            timeout_s=timeout_s,
        )

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
            self._waiting[call.id] = done.approval_id

        decision = await self.gate.request(request, opened)
        emit(
            ApprovalResolved(
                approval_id=self._waiting.pop(call.id, ""),
                decision=decision.outcome,
                by=decision.by,
                reason=decision.reason,
            )
        )
        if not decision.approved:
            return ToolResult.fail(decision.observation(timeout_s), step=step)
        result = await self._call(call.name, args, dataclasses.replace(ctx, approved=True))
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
            with self._span(call, step, args):
                result = await self._gated(call, args or {}, step, emit)
                tracing.end_tool(result.ok, result.error, result.output)
        elapsed_ms = (time.perf_counter() - start) * 1000
        self._audit(call, args, step, result, elapsed_ms)
        return index, result, elapsed_ms

    def _span(
        self, call: ToolCallRequest, step: str, args: dict[str, Any] | None
    ) -> AbstractContextManager[None]:
        """The call's `execute_tool` span (docs/operations.md), current while it runs."""
        if not tracing.enabled():
            return contextlib.nullcontext()
        tool = self.toolset.full_tools().get(call.name)
        kind = tool.kind if tool is not None else "unknown"
        return tracing.tool_span(call.name, call.id, kind=kind, source=step, arguments=args)

    def _audit(
        self,
        call: ToolCallRequest,
        args: dict[str, Any] | None,
        step: str,
        result: ToolResult,
        elapsed_ms: float,
    ) -> None:
        if self.audit is not None:
            self.audit.record(
                tool_call_row(
                    call_id=call.id,
                    name=call.name,
                    arguments=args if args is not None else call.arguments,
                    tool=self.toolset.full_tools().get(call.name),
                    step=result.step or step,
                    result=result,
                    ctx=self.ctx,
                    latency_ms=elapsed_ms,
                )
            )

    async def run(
        self, calls: list[ToolCallRequest], iteration: int, messages: list[ChatMessage]
    ) -> AsyncIterator[RunEvent | PhaseResult]:
        """Yield tool_call events, then results as they complete, then the `PhaseResult`.

        Observations are appended to `messages` in call order (and returned in the result).
        """
        outcome: NextStep = RunAgain()
        start = len(messages)
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
        started = time.perf_counter()
        # Results and approval events arrive on one queue: a call that waits for a person
        # pauses alone while the turn's other calls finish and are reported.
        outbox: asyncio.Queue[RunEvent | Finished] = asyncio.Queue()

        async def one(index: int, plan: Planned) -> None:
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
            async with contextlib.aclosing(self._completed(outbox, len(tasks))) as completed:
                async for item in completed:
                    if not isinstance(item, tuple):
                        yield item
                        continue
                    index, result, ms = item
                    results[index] = result
                    yield self._result_event(planned[index][0], result, ms)
                    if result.loaded_tools:
                        yield ToolsLoaded(names=list(result.loaded_tools))
        finally:
            await _stop(tasks)
        while not outbox.empty():  # approval events of calls the cancel stopped
            item = outbox.get_nowait()
            if not isinstance(item, tuple):
                yield item
        for call_id, approval_id in list(self._waiting.items()):
            yield ApprovalResolved(approval_id=approval_id, decision="cancelled")
            del self._waiting[call_id]
        cancelled = [i for i in range(len(planned)) if i not in results]
        for index in cancelled:
            results[index] = ToolResult.fail(CANCELLED_ERROR)
            ms = (time.perf_counter() - started) * 1000
            call, args, _error, step = planned[index]
            self._audit(call, args, step, results[index], ms)
            yield self._result_event(call, results[index], ms)
        if cancelled:
            outcome = Stopped(status="cancelled")
        for index, (call, _args, _error, step) in enumerate(planned):
            result = results[index]
            text = redact_text(result.text)
            stop = None if index in cancelled else self._track(result, result.step or step)
            if stop is not None:
                action = (
                    self.step_iteration.on_limit_reached if self.step_iteration else "skip_step"
                )
                yield stop.event(action)
                if action == "skip_step":
                    self.skipped[stop.step_id] = stop.reason
                    text += f"\n[{stop.reason}. This step is skipped for the rest of the run.]"
                elif not isinstance(outcome, Stopped):  # the first stop of a turn wins
                    outcome = Stopped(
                        status="stopped", reason=stop.reason, escalated=action == "escalate"
                    )
            messages.append(ChatMessage.tool(call.id, text, name=call.name))
        yield PhaseResult(new_messages=messages[start:], next_step=outcome)

    async def _completed(
        self, outbox: asyncio.Queue[RunEvent | Finished], calls: int
    ) -> AsyncGenerator[RunEvent | Finished]:
        """Approval events and results in arrival order; stops early (leaving calls
        pending) on cancel."""
        received = 0
        if self.cancel is None:  # nothing to race against: no waiter task per item
            while received < calls:
                item = await outbox.get()
                received += isinstance(item, tuple)
                yield item
            return
        cancel = asyncio.ensure_future(self.cancel.wait())
        try:
            while received < calls:
                if cancel.done():
                    return
                getter = asyncio.ensure_future(outbox.get())
                waits: set[asyncio.Future[Any]] = {getter, cancel}
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    return
                item = getter.result()
                if isinstance(item, tuple):
                    received += 1
                yield item
        finally:
            cancel.cancel()

    @staticmethod
    def _result_event(call: ToolCallRequest, result: ToolResult, ms: float) -> ToolResultEvent:
        return ToolResultEvent(
            call_id=call.id,
            name=call.name,
            ok=result.ok,
            output=redact_text(result.output) if result.ok else "",
            error=None if result.ok else redact_text(result.error or "error"),
            duration_ms=round(ms, 2),
        )

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


async def _stop(tasks: Sequence[asyncio.Future[None]]) -> None:
    """Cancel the calls still running and give them `CANCEL_GRACE_S` to stop remote work."""
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=CANCEL_GRACE_S)
