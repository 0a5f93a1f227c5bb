"""`call_agent` as a child run: the `DelegationBackend` the chat runner plugs into the pipeline.

A delegation is a run of its own (`parent_run_id` set, in the caller's conversation, owned by
the caller's key and user), assembled from the delegate's own tool set, modes and primitives
and executed by the same `RunManager` (journal, approvals, cancel, metrics). The caller's
stream gets `delegation_started` / `delegation_finished` and the child's approval events;
the caller's model gets the delegate's final answer and nothing else (docs/contract.md §12).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.apikeys.models import ApiKey
from app.apikeys.repository import ApiKeyRepository
from app.chat.active import ActiveRun, Published
from app.chat.loop import RunInput
from app.chat.models import Run
from app.chat.repository import RunRepository
from app.chat.runner import RunManager
from app.events import (
    ApprovalRequested,
    ApprovalResolved,
    DelegationFinished,
    DelegationStarted,
    MessageEvent,
    RunEvent,
    RunFailed,
    RunFinished,
)
from app.tenancy.principal import Principal
from app.tools.base import CallContext, ToolResult

Emit = Callable[[RunEvent], None]

MAX_DEPTH = 3
"""A top-level run is depth 0; its delegations 1, theirs 2, and so on up to 3."""
CANCEL_WAIT_S = 0.5
"""How long a cancelled delegation waits for its child to journal its end (the tool phase
gives cancelled calls 0.75 s)."""
TIMEOUT_WAIT_S = 5.0
"""How long a timed-out delegation waits for its cancelled child to end."""


@dataclass(frozen=True)
class Lineage:
    depth: int
    agents: tuple[str, ...]
    """Agent ids from the top-level run down to this run (the cycle check)."""


@dataclass
class _Outcome:
    status: str = "failed"
    answer: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    error_code: str | None = None
    ended: bool = False


class Refused(Exception):
    """A delegation that must not start: the message is the model's error observation."""


class Delegator:
    """Runs `call_agent` delegations on the worker that runs the caller (bound at start-up)."""

    def __init__(self) -> None:
        self._manager: RunManager | None = None
        self._lineage: dict[str, Lineage] = {}

    def bind(self, manager: RunManager) -> None:
        self._manager = manager

    async def delegate(self, delegate: Agent, task: str, ctx: CallContext) -> ToolResult:
        manager = self._manager
        if manager is None or manager.llm is None or ctx.run_id is None:
            return ToolResult.fail("call_agent cannot run here: delegation needs a chat run")
        lineage = self._lineage.get(ctx.run_id) or Lineage(0, (ctx.agent_id or "",))
        try:
            self._check(lineage, delegate)
            active, inp = await self._create(manager, delegate, task, ctx)
        except Refused as exc:
            return ToolResult.fail(str(exc))
        child_id = str(active.run_id)
        self._lineage[child_id] = Lineage(lineage.depth + 1, (*lineage.agents, str(delegate.id)))
        queue = active.subscribe()
        emit: Emit = ctx.emit or _ignore
        try:
            manager.adopt(active, inp, keep_messages=False)
            # The lineage lives as long as the child runs, not as long as the caller waits.
            assert active.task is not None
            active.task.add_done_callback(lambda _task: self._lineage.pop(child_id, None))
            emit(DelegationStarted(child_run_id=child_id, agent=delegate.name))
            outcome = _Outcome()
            timeout_s = manager.settings.delegation_timeout_s
            try:
                await asyncio.wait_for(self._follow(queue, outcome, emit), timeout_s)
            except TimeoutError:
                active.cancel.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._follow(queue, outcome, emit), TIMEOUT_WAIT_S)
                outcome.status = "timeout"
                emit(_finished(child_id, outcome))
                return ToolResult.fail(
                    f"Agent {delegate.name!r} did not answer within {timeout_s:g}s;"
                    " its run was cancelled"
                )
            except asyncio.CancelledError:  # the caller was cancelled (or its call timed out)
                active.cancel.set()
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(self._follow(queue, outcome, emit), CANCEL_WAIT_S)
                if not outcome.ended:
                    outcome.status = "cancelled"
                emit(_finished(child_id, outcome))
                raise
            emit(_finished(child_id, outcome))
            return _result(delegate.name, outcome)
        finally:
            active.unsubscribe(queue)
            if active.task is None:
                self._lineage.pop(child_id, None)

    @staticmethod
    def _check(lineage: Lineage, delegate: Agent) -> None:
        if lineage.depth >= MAX_DEPTH:
            raise Refused(
                f"Delegation refused: the depth limit ({MAX_DEPTH}) is reached; do the task"
                " yourself or answer with what you have"
            )
        if str(delegate.id) in lineage.agents:
            raise Refused(
                f"Delegation refused: agent {delegate.name!r} is already working on this task"
                " higher up the chain of delegations (a cycle)"
            )

    async def _create(
        self, manager: RunManager, delegate: Agent, task: str, ctx: CallContext
    ) -> tuple[ActiveRun, RunInput]:
        """Store the child run (claimed, so the heartbeat never takes it for lost)."""
        run_id = uuid.uuid4()
        manager.liveness.claim(run_id)
        try:
            async with manager.sessionmaker() as session:
                parent = await RunRepository(session).get(uuid.UUID(ctx.run_id or ""))
                if parent is None or parent.status != "running":
                    raise Refused("Delegation refused: the calling run is no longer running")
                agent = await AgentRepository(session).get(delegate.id)
                if agent is None:
                    raise Refused(f"Delegation refused: agent {delegate.name!r} no longer exists")
                key = None
                if parent.api_key_id is not None:
                    key = await ApiKeyRepository(session).get(parent.api_key_id)
                if not _may_use(key, agent):
                    raise Refused(
                        f"Delegation refused: agent {delegate.name!r} is not available to"
                        " this API key"
                    )
                session.add(
                    Run(
                        id=run_id,
                        parent_run_id=parent.id,
                        conversation_id=parent.conversation_id,
                        agent_id=agent.id,
                        worker_id=manager.worker_id,
                        api_key_id=parent.api_key_id,
                        user=parent.user,
                    )
                )
                await session.commit()
        except BaseException:
            manager.liveness.unclaim(run_id)
            raise
        active = ActiveRun(run_id=run_id, conversation_id=parent.conversation_id)
        inp = RunInput(
            run_id=str(run_id),
            conversation_id=str(parent.conversation_id),
            agent=agent,
            message=task,
            api_key_id=str(parent.api_key_id) if parent.api_key_id else None,
            user=parent.user,
        )
        return active, inp

    @staticmethod
    async def _follow(queue: asyncio.Queue[Published], outcome: _Outcome, emit: Emit) -> None:
        """Read the child's stored events until its end; approvals go to the caller too."""
        while not outcome.ended:
            item = await queue.get()
            if item is None:  # ended without a stored final event
                outcome.ended = True
                return
            _seq, event = item
            _observe(event, outcome, emit)


def _observe(event: RunEvent, outcome: _Outcome, emit: Emit) -> None:
    match event:
        case ApprovalRequested() | ApprovalResolved():
            emit(event)
        case MessageEvent(content=content):
            outcome.answer = content
        case RunFinished(status=status, usage=usage):
            outcome.status, outcome.usage, outcome.ended = status, dict(usage), True
        case RunFailed(error=error):
            outcome.status, outcome.error_code, outcome.ended = "failed", error.code, True
        case _:
            pass


def _ignore(event: RunEvent) -> None:
    """Where a delegation's events go when its caller has no stream."""


def _may_use(key: ApiKey | None, agent: Agent) -> bool:
    """The caller's key restrictions (`agent_ids`) hold inside its delegations too."""
    return key is None or Principal.of(key).may_use(agent.id)


def _finished(child_id: str, outcome: _Outcome) -> DelegationFinished:
    return DelegationFinished(
        child_run_id=child_id,
        status=outcome.status,  # type: ignore[arg-type]
        usage=outcome.usage,
    )


def _result(name: str, outcome: _Outcome) -> ToolResult:
    """The delegate's final answer, or why there is none (never its messages)."""
    if outcome.status == "completed":
        return ToolResult.success(outcome.answer or f"(agent {name!r} gave an empty answer)")
    if outcome.status == "failed":
        code = f" ({outcome.error_code})" if outcome.error_code else ""
        return ToolResult.fail(f"Agent {name!r} failed{code} before it answered")
    return ToolResult.fail(f"Agent {name!r} ended without an answer ({outcome.status})")
