"""The ReAct loop: assemble → pre-hydrate → {model call → tool calls → observations}.

`ReactRun.events(config)` is an async generator of RunEvents; the runner journals each one
before anyone sees it. Its last item is a `RunResult` (like a tool phase's `PhaseResult`):
the final status and everything the model did (`new_messages`), so the conversation can
continue in the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from app.agents.models import Agent
from app.approvals.gate import ApprovalGate
from app.approvals.policy import glob_reason
from app.audit.record import tool_call_row
from app.chat.context import compact
from app.chat.selector import llm_selector
from app.chat.steps import FinalAnswer, NextStep, PhaseResult, RunAgain, RunCancelled, Stopped
from app.chat.tool_phase import ToolPhase
from app.config import Settings
from app.events import (
    ContextCompacted,
    DelegationFinished,
    ErrorInfo,
    MessageEvent,
    ModelDelta,
    RunEvent,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolSelection,
)
from app.llm.client import LlmClient, LlmError
from app.llm.types import ChatMessage, Completion, TextDelta, Usage
from app.ops import tracing
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import RunConfig
from app.pipeline.sources.backends import Backends
from app.pipeline.toolset import AssembledToolset
from app.reasoning.hydrate import prehydrate, schema_tool_args
from app.reasoning.progress import step_id_for
from app.security.redact import redact_text
from app.tools.base import CallContext, ToolResult

logger = logging.getLogger(__name__)
T = TypeVar("T")
_DELTA_FLUSH_S = 0.03
_DELTA_FLUSH_CHARS = 256
FIRST_OUT_WAIT_S = 1.0


class CancelWatch:
    """One watcher task per run turns `cancel` into a cancellation of the guarded await.

    `guard(aw)` awaits `aw` in the calling task (no task per call): the watcher, started on
    the first guard, waits for the event once; if it fires while a guard is awaiting, it
    cancels that task and the guard raises `RunCancelled`. A guard entered after the event
    raises at once. Other cancellations (shutdown) pass through as `CancelledError`.
    """

    __slots__ = ("_cancel", "_fired", "_waiting", "_watcher")

    def __init__(self, cancel: asyncio.Event) -> None:
        self._cancel = cancel
        self._waiting: asyncio.Task[Any] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._fired = False

    async def guard(self, awaitable: Awaitable[T]) -> T:
        if self._cancel.is_set():
            close = getattr(awaitable, "close", None)
            if close is not None:  # a coroutine never awaited would warn
                close()
            raise RunCancelled
        if self._watcher is None:
            self._watcher = asyncio.create_task(self._watch(), name="run-cancel-watch")
        task = self._waiting = asyncio.current_task()
        try:
            return await awaitable
        except asyncio.CancelledError:
            if self._fired and task is not None and task.uncancel() == 0:
                self._fired = False
                raise RunCancelled from None
            raise
        finally:
            self._waiting = None

    async def _watch(self) -> None:
        await self._cancel.wait()
        if self._waiting is not None:
            self._fired = True
            self._waiting.cancel()

    def close(self) -> None:
        """The run is over: stop the watcher."""
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None


@dataclass(kw_only=True)
class RunInput:
    run_id: str
    conversation_id: str
    agent: Agent
    message: str
    history: list[ChatMessage] = field(default_factory=list)
    api_key_id: str | None = None
    user: str | None = None


@dataclass(kw_only=True)
class RunDeps:
    settings: Settings
    backends: Backends
    llm: LlmClient
    cancel: asyncio.Event
    approvals: ApprovalGate | None = None
    """Decides calls that wait for a person; none: such calls fail."""
    stored: asyncio.Future[None] | None = None
    """The write storing the run, when it is still in flight as the run starts (its first
    model call goes out meanwhile): awaited before anything that writes rows referencing the
    run (tool calls: approvals, audit, delegations)."""
    stored_first: bool = False
    """Wait for `stored` before the first model call too: in a burst of starts the writes (and
    so every run's first event) go first, the model calls after."""
    first_out: asyncio.Event | None = None
    """With `stored_first`: set once the run's first event was sent to the client that started
    it; the first model call waits for that too (at most `FIRST_OUT_WAIT_S`). In a burst the
    model calls' streaming would otherwise share the event loop with the first events still
    to be sent (docs/benchmarks.md, "Side by side")."""


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """What a run leaves behind, yielded last by `ReactRun.events`: how it ended, the
    messages to add to the conversation (the user's first), iterations and token usage."""

    status: str
    new_messages: list[ChatMessage]
    iterations: int
    usage: Usage


@dataclass
class ReactRun:
    deps: RunDeps
    inp: RunInput
    # What `events` accumulates for the `RunResult` it yields last.
    _new_messages: list[ChatMessage] = field(default_factory=list, init=False)
    _usage: Usage = field(default_factory=Usage, init=False)
    _iterations: int = field(default=0, init=False)
    _status: str = field(default="running", init=False)
    started: float = field(default_factory=time.perf_counter)
    _watch: CancelWatch = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._watch = CancelWatch(self.deps.cancel)

    # --- helpers -------------------------------------------------------------------------

    async def _run_stored(self) -> None:
        """Wait until the run's own row is stored (see `RunDeps.stored`)."""
        stored, self.deps.stored = self.deps.stored, None
        if stored is None:
            return
        try:
            await self._guard(asyncio.shield(stored))
        except Exception:
            raise RunCancelled from None  # not stored: `RunManager.start` stops this run

    async def _first_out(self) -> None:
        """Wait until the run's first event was sent (see `RunDeps.first_out`); a stream that
        never starts (its client went away) holds the model call for `FIRST_OUT_WAIT_S`."""
        first, self.deps.first_out = self.deps.first_out, None
        if first is None or first.is_set():
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FIRST_OUT_WAIT_S):
                await self._guard(first.wait())

    async def _guard(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` in this task unless the run is cancelled first (see `CancelWatch`)."""
        return await self._watch.guard(awaitable)

    def _finished(
        self, status: str, *, reason: str | None = None, escalated: bool = False
    ) -> RunFinished:
        self._status = status
        return RunFinished(
            status=status,  # type: ignore[arg-type]
            iterations=self._iterations,
            usage=self._usage.to_dict(),
            elapsed_ms=round((time.perf_counter() - self.started) * 1000, 2),
            reason=reason,
            escalated=escalated,
        )

    def _failed(self, code: str, message: str) -> RunFailed:
        self._status = "failed"
        return RunFailed(error=ErrorInfo(code=code, message=message))

    # --- phases --------------------------------------------------------------------------

    async def _assemble(self, config: RunConfig) -> AssembledToolset:
        agent, settings = self.inp.agent, self.deps.settings
        selector = llm_selector(self.deps.llm, model=agent.model)
        return await assemble_toolset(
            agent, settings, self.deps.backends, self.inp.message, config=config, selector=selector
        )

    async def _prehydrate(
        self, toolset: AssembledToolset, ctx: CallContext, config: RunConfig
    ) -> AsyncIterator[RunEvent | str]:
        hydration, approval = config.pre_hydration, config.approval
        if hydration is None:
            return
        await self._run_stored()

        async def call_tool(call_id: str, name: str, args: dict[str, Any]) -> ToolResult:
            started = time.perf_counter()
            tool = toolset.full_tools().get(name)
            kind = tool.kind if tool else ""
            step = step_id_for(name, args, kind, target=tool.target if tool else "")
            waits = glob_reason(approval, name, kind, args, step)
            if waits is not None:  # nobody is asked during pre-hydration: it does not run
                result = ToolResult.needs_approval(waits, step=step)
            else:
                result = await toolset.call(name, args, ctx, active_only=False)
            if self.deps.backends.tool_audit is not None:  # audited like the model's calls
                self.deps.backends.tool_audit.record(
                    tool_call_row(
                        call_id=call_id,
                        name=name,
                        arguments=args,
                        tool=toolset.full_tools().get(name),
                        step=None,
                        result=result,
                        ctx=ctx,
                        latency_ms=(time.perf_counter() - started) * 1000,
                    )
                )
            return result

        result = await self._guard(
            prehydrate(
                self.inp.message,
                hydration,
                call_tool=call_tool,
                tool_args=schema_tool_args(toolset.full_tools()),
            )
        )
        event = result.event()
        if event is not None:
            yield event
        if result.system_message:
            yield result.system_message

    async def _model_turn(
        self, tools: list[dict[str, Any]], messages: list[ChatMessage], config: RunConfig
    ) -> AsyncIterator[ModelDelta | Completion]:
        """Stream one model call, coalescing deltas into readable chunks."""
        model = self.inp.agent.model or self.deps.settings.llm_model
        span = tracing.start_model_span(model, lambda: [m.to_openai() for m in messages])
        completion: Completion | None = None
        failure: BaseException | None = None
        stream = self.deps.llm.stream_chat(
            messages,
            tools=tools or None,
            model=self.inp.agent.model,
            temperature=config.temperature,
        )
        # The first delta goes out at once (time to first token); later ones are coalesced.
        pending, last_flush = "", float("-inf")
        try:
            async for item in self._guarded(stream):
                if isinstance(item, TextDelta):
                    pending += item.text
                    now = time.perf_counter()
                    if now - last_flush >= _DELTA_FLUSH_S or len(pending) >= _DELTA_FLUSH_CHARS:
                        yield ModelDelta(text=pending)
                        pending, last_flush = "", now
                else:
                    if pending:
                        yield ModelDelta(text=pending)
                    completion = item
                    yield item
                    return
        except BaseException as exc:
            failure = exc
            raise
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                await closer()
            if span is not None:
                _end_model_span(span, completion, failure)

    async def _guarded(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        guard = self._watch.guard
        while True:
            try:
                yield await guard(anext(stream))
            except StopAsyncIteration:
                return

    # --- the loop ------------------------------------------------------------------------

    async def events(self, config: RunConfig) -> AsyncIterator[RunEvent | RunResult]:
        """The run's events, then its `RunResult` (also after an unexpected error, which
        ends the run with `run_failed {code: internal_error}`)."""
        try:
            async for event in self._events(config):
                yield event
        except Exception as exc:  # the loop's exception boundary: the run ends typed
            logger.exception("run %s failed", self.inp.run_id)
            yield self._failed("internal_error", redact_text(f"{type(exc).__name__}: {exc}"))
        yield RunResult(
            status=self._status,
            new_messages=list(self._new_messages),
            iterations=self._iterations,
            usage=self._usage,
        )

    async def _events(self, config: RunConfig) -> AsyncIterator[RunEvent]:
        inp = self.inp
        ctx = CallContext(
            run_id=inp.run_id, agent_id=str(inp.agent.id), api_key_id=inp.api_key_id, user=inp.user
        )
        toolset = await self._assemble(config)
        try:
            yield RunStarted(
                run_id=inp.run_id,
                conversation_id=inp.conversation_id,
                agent_id=str(inp.agent.id),
                modes=toolset.modes.as_dict(),
                tools=[t.name for t in toolset.tools],
            )
            if toolset.selection is not None:
                sel = toolset.selection
                yield ToolSelection(
                    strategy=str(sel.strategy),
                    total=sel.total,
                    selected=list(sel.active),
                    elapsed_ms=sel.elapsed_ms,
                )
            messages = [ChatMessage.system(toolset.system_prompt), *inp.history]
            async for item in self._prehydrate(toolset, ctx, config):
                if isinstance(item, str):
                    messages.append(ChatMessage.system(item))
                else:
                    yield item
            user = ChatMessage.user(inp.message)
            messages.append(user)
            self._new_messages.append(user)
            phase = ToolPhase(
                toolset=toolset,
                ctx=ctx,
                timeout_s=self.deps.settings.tool_timeout_s,
                step_iteration=config.step_iteration,
                audit=self.deps.backends.tool_audit,
                approval=config.approval,
                gate=self.deps.approvals,
                cancel=self.deps.cancel,
            )
            async for event in self._iterate(config, messages, phase):
                yield event
        except RunCancelled:
            yield self._finished("cancelled")
        except LlmError as exc:
            yield self._failed(exc.code, exc.message)
        finally:
            self._watch.close()
            await toolset.aclose()

    async def _iterate(
        self, config: RunConfig, messages: list[ChatMessage], phase: ToolPhase
    ) -> AsyncIterator[RunEvent]:
        for iteration in range(1, config.max_iterations + 1):
            self._iterations = iteration
            tools = phase.offered()
            compaction = compact(messages, tools, budget=config.context_budget)
            if compaction is not None and compaction.cleared:
                yield ContextCompacted(
                    before_tokens=compaction.before_tokens,
                    after_tokens=compaction.after_tokens,
                    cleared=compaction.cleared,
                )
            completion: Completion | None = None
            if self.deps.stored_first:
                await self._run_stored()
                await self._first_out()
            async for item in self._model_turn(tools, messages, config):
                if isinstance(item, Completion):
                    completion = item
                else:
                    yield item
            if completion is None:
                raise LlmError("llm_bad_response", "the model stream ended without a completion")
            self._usage = self._usage + completion.usage
            messages.append(completion.message)
            self._new_messages.append(completion.message)
            step: NextStep = RunAgain()
            if not completion.tool_calls:
                step = FinalAnswer(content=completion.text)
            else:
                await self._run_stored()
                async for out in phase.run(completion.tool_calls, iteration, messages):
                    if isinstance(out, PhaseResult):
                        self._new_messages.extend(out.new_messages)
                        step = out.next_step
                    else:
                        if isinstance(out, DelegationFinished):  # a child run's tokens
                            self._usage = self._usage + Usage.from_dict(out.usage)
                        yield out
            match step:
                case FinalAnswer(content=content):
                    yield MessageEvent(content=content)
                    yield self._finished("completed")
                    return
                case Stopped(status=status, reason=reason, escalated=escalated):
                    yield self._finished(status, reason=reason, escalated=escalated)
                    return
                case RunAgain():
                    if self.deps.cancel.is_set():
                        raise RunCancelled
        yield self._finished("max_iterations")


def _end_model_span(
    span: tracing.ModelSpan, completion: Completion | None, failure: BaseException | None
) -> None:
    usage = completion.usage if completion is not None else Usage()
    tracing.end_model_span(
        span,
        response_model=completion.model if completion is not None else None,
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        finish_reason=completion.finish_reason if completion is not None else None,
        output=completion.message.to_openai() if completion is not None else None,
        error=failure if completion is None else None,
    )
