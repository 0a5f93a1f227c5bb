"""One turn's tool calls: run concurrently under a timeout, track progress, report events.

Cancelling the run cancels the calls still in flight: each executor stops its work at the
other end (MCP `notifications/cancelled`, the database query cancelled server-side, the HTTP
request aborted), every unfinished call is answered with a cancelled observation, and the
turn ends the run as `cancelled`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.agents.config import StepIteration
from app.audit.record import tool_call_row
from app.audit.sink import ToolAuditBackend
from app.chat.steps import NextStep, PhaseResult, RunAgain, Stopped
from app.events import RunEvent, ToolCallEvent, ToolResultEvent, ToolsLoaded
from app.llm.types import ChatMessage, ToolCallRequest
from app.pipeline.toolset import AssembledToolset
from app.reasoning.progress import ProgressTracker, Stop, step_id_for
from app.security.redact import redact_text
from app.tools.base import CallContext, ToolResult

CANCEL_GRACE_S = 0.75
"""How long a cancelled turn waits for its calls to stop their remote work; a call still
cleaning up after that finishes in the background."""
CANCELLED_ERROR = "Cancelled: the run was cancelled before this tool call finished"


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

    async def _run_one(
        self,
        index: int,
        call: ToolCallRequest,
        args: dict[str, Any] | None,
        error: str | None,
        step: str,
    ) -> tuple[int, ToolResult, float]:
        start = time.perf_counter()
        if error is not None:
            result = ToolResult.fail(error)
        elif step in self.skipped:
            result = ToolResult.fail(
                f"Step '{step}' was skipped for the rest of this run: {self.skipped[step]}"
            )
        else:
            try:
                result = await asyncio.wait_for(
                    self.toolset.call(call.name, args or {}, self.ctx), self.timeout_s
                )
            except TimeoutError:
                result = ToolResult.fail(
                    f"Tool {call.name!r} timed out after {self.timeout_s:g}s", retryable=True
                )
        elapsed_ms = (time.perf_counter() - start) * 1000
        self._audit(call, args, step, result, elapsed_ms)
        return index, result, elapsed_ms

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
        planned: list[tuple[ToolCallRequest, dict[str, Any] | None, str | None, str]] = []
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
        tasks = [
            asyncio.ensure_future(self._run_one(index, *plan)) for index, plan in enumerate(planned)
        ]
        results: dict[int, ToolResult] = {}
        try:
            async with contextlib.aclosing(self._completed(tasks)) as completed:
                async for index, result, ms in completed:
                    results[index] = result
                    yield self._result_event(planned[index][0], result, ms)
                    if result.loaded_tools:
                        yield ToolsLoaded(names=list(result.loaded_tools))
        finally:
            await _stop(tasks)
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
        self, tasks: Sequence[asyncio.Future[tuple[int, ToolResult, float]]]
    ) -> AsyncGenerator[tuple[int, ToolResult, float]]:
        """Results in completion order; stops early (leaving calls pending) on cancel."""
        pending: set[asyncio.Future[Any]] = set(tasks)
        cancel = asyncio.ensure_future(self.cancel.wait()) if self.cancel is not None else None
        try:
            while pending:
                if cancel is not None and cancel.done():
                    return
                waits = pending if cancel is None else pending | {cancel}
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for task in tasks:
                    if task in done:
                        pending.discard(task)
                        yield task.result()
        finally:
            if cancel is not None:
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


async def _stop(tasks: Sequence[asyncio.Future[tuple[int, ToolResult, float]]]) -> None:
    """Cancel the calls still running and give them `CANCEL_GRACE_S` to stop remote work."""
    running = [task for task in tasks if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=CANCEL_GRACE_S)
