"""RunManager: starts runs as background tasks, journals their events, fans them out.

A run is not tied to the HTTP connection that started it: the POST /chat stream only
subscribes to it. A client disconnect drops the subscription; the task finishes, and the
journal keeps every event for replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.approvals.stored import StoredApprovalGate
from app.chat.hub import CANCEL_PREFIX, CHANNEL, RunHub
from app.chat.journal import JournalBatcher, JournalWriter
from app.chat.loop import ReactRun, RunDeps, RunInput
from app.chat.models import Conversation, Message, Run
from app.chat.repository import ConversationRepository, RunRepository
from app.chat.schemas import ChatRequest
from app.config import Settings
from app.db.base import utcnow
from app.errors import Conflict, Invalid, NotFound, Unavailable
from app.events import TERMINAL_KINDS, ErrorInfo, RunEvent, RunFailed, event_payload
from app.llm.client import LlmClient
from app.llm.types import ChatMessage, Role, ToolCallRequest
from app.security.redact import redact_text
from app.tenancy.limits import count_run_start
from app.tenancy.principal import Principal
from app.tools.backends import Backends

logger = logging.getLogger("quiver.runs")
RUN_STALE_AFTER = timedelta(minutes=15)
"""Longer than any model call plus tool call, with retries (both default to ≤ 2 minutes)."""
Published = tuple[int, RunEvent]
Submitted = tuple[int, RunEvent, "asyncio.Future[None]"]


@dataclass(eq=False)
class ActiveRun:
    run_id: uuid.UUID
    conversation_id: uuid.UUID
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    subscribers: list[asyncio.Queue[Published]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None

    def subscribe(self) -> asyncio.Queue[Published]:
        queue: asyncio.Queue[Published] = asyncio.Queue()
        self.subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Published]) -> None:
        with contextlib.suppress(ValueError):
            self.subscribers.remove(queue)

    def publish(self, item: Published) -> None:
        for queue in self.subscribers:
            queue.put_nowait(item)


def history_from_rows(rows: list[Message]) -> list[ChatMessage]:
    """Stored messages → model messages, dropping tool calls that never got a result."""
    answered = {row.tool_call_id for row in rows if row.role == "tool"}
    out: list[ChatMessage] = []
    for row in rows:
        calls = [ToolCallRequest.from_openai(c) for c in row.tool_calls or []]
        calls = [c for c in calls if c.id in answered]
        if row.role == "assistant" and not calls and not row.content:
            continue
        out.append(
            ChatMessage(
                role=cast(Role, row.role),
                content=row.content,
                tool_calls=calls or None,
                tool_call_id=row.tool_call_id,
                name=row.name,
            )
        )
    return out


def message_row(message: ChatMessage) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [c.to_openai() for c in message.tool_calls] if message.tool_calls else None,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


class RunManager:
    def __init__(
        self,
        *,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        hub: RunHub,
        backends: Backends,
        llm: LlmClient | None,
        on_finished: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.hub = hub
        self.backends = backends
        self.llm = llm
        self.on_finished = on_finished
        self.active: dict[uuid.UUID, ActiveRun] = {}
        self.journal = JournalBatcher(
            sessionmaker=sessionmaker, hub=hub, notify=not settings.is_sqlite
        )
        hub.on_cancel = self._cancel_local

    # --- start ---------------------------------------------------------------------------

    async def _prepare(
        self, req: ChatRequest, principal: Principal
    ) -> tuple[Agent, Run, list[ChatMessage]]:
        async with self.sessionmaker() as session:
            agent = await AgentRepository(session).get(req.agent_id)
            if agent is None or not principal.may_use(agent.id):
                raise NotFound(f"agent {str(req.agent_id)!r} not found")
            # First, before any row that references the key: its lock orders concurrent starts.
            # A refusal below rolls the count back with everything else.
            await count_run_start(session, principal)
            conversations = ConversationRepository(session)
            if req.conversation_id is not None:
                stmt = (
                    select(Conversation)
                    .where(Conversation.id == req.conversation_id)
                    .with_for_update()
                )
                conversation = (await session.execute(stmt)).scalar_one_or_none()
                conversation = principal.owned(conversation, "conversation", req.conversation_id)
                if conversation.agent_id != agent.id:
                    raise Invalid("conversation_id: the conversation belongs to another agent")
                if await self._blocking_run(session, conversation.id):
                    raise Conflict(
                        "a run is already in progress in this conversation; wait for it to "
                        "finish or cancel it (POST /api/v1/runs/{run_id}/cancel)"
                    )
                history = history_from_rows(await conversations.messages(conversation.id))
            else:
                conversation = Conversation(
                    agent_id=agent.id,
                    title=req.message[:80],
                    api_key_id=principal.key_id,
                    user=principal.user,
                )
                session.add(conversation)
                await session.flush()
                history = []
            run = Run(
                conversation_id=conversation.id,
                agent_id=agent.id,
                api_key_id=principal.key_id,
                user=principal.user,
            )
            session.add(run)
            await session.commit()
        return agent, run, history

    async def _blocking_run(self, session: AsyncSession, conversation_id: uuid.UUID) -> bool:
        """Is a run still in progress here? A run whose process died (no event for
        `RUN_STALE_AFTER`, and not one of ours) is closed as lost instead of blocking forever."""
        repo = RunRepository(session)
        run = await repo.running_in_conversation(conversation_id)
        if run is None:
            return False
        if run.id in self.active or utcnow() - await repo.last_activity(run) < RUN_STALE_AFTER:
            return True
        lost = RunFailed(
            error=ErrorInfo(
                code="run_lost", message="the process running this run stopped before it finished"
            )
        )
        seq = len(await repo.events_after(run.id, 0)) + 1
        await repo.append_event(run.id, seq, lost.kind, event_payload(lost))
        await repo.finish(
            run.id,
            status="failed",
            iterations=run.iterations,
            usage=run.usage,
            error=lost.error.model_dump(),
        )
        return False

    async def start(
        self, req: ChatRequest, principal: Principal
    ) -> tuple[ActiveRun, asyncio.Queue[Published]]:
        if self.llm is None:
            raise Unavailable(
                "chat is unavailable: no LLM is configured (set QUIVER_LLM_BASE_URL, and "
                "QUIVER_LLM_API_KEY / QUIVER_LLM_MODEL as needed)"
            )
        agent, run, history = await self._prepare(req, principal)
        active = ActiveRun(run_id=run.id, conversation_id=run.conversation_id)
        queue = active.subscribe()
        self.active[run.id] = active
        inp = RunInput(
            run_id=str(run.id),
            conversation_id=str(run.conversation_id),
            agent=agent,
            message=req.message,
            history=history,
            api_key_id=str(principal.key_id),
            user=principal.user,
        )
        active.task = asyncio.create_task(self._execute(active, inp), name=f"run-{run.id}")
        return active, queue

    def _llm(self) -> LlmClient:
        assert self.llm is not None, "start() refuses runs without an LLM"
        return self.llm

    # --- execute -------------------------------------------------------------------------

    async def _execute(self, active: ActiveRun, inp: RunInput) -> None:
        journal = JournalWriter(run_id=active.run_id, batcher=self.journal)
        deps = RunDeps(
            settings=self.settings,
            backends=self.backends,
            llm=self._llm(),
            cancel=active.cancel,
            approvals=StoredApprovalGate(
                sessionmaker=self.sessionmaker,
                hub=self.hub,
                run_id=active.run_id,
                api_key_id=uuid.UUID(inp.api_key_id) if inp.api_key_id else None,
                user=inp.user,
                cancel=active.cancel,
            ),
        )
        run = ReactRun(deps=deps, inp=inp)
        terminal: RunEvent | None = None
        # The loop does not wait for the journal: events are queued for storage in order, and
        # a publisher sends each one as soon as it is committed.
        stored: asyncio.Queue[Submitted | None] = asyncio.Queue()
        publisher = asyncio.create_task(self._publish_in_order(active, stored))
        try:
            async for event in run.events():
                if event.kind in TERMINAL_KINDS:
                    terminal = event  # written after the conversation is persisted
                else:
                    stored.put_nowait(journal.submit(event))
        except Exception as exc:  # the run's one exception boundary: journal it, typed
            logger.exception("run %s failed", active.run_id)
            terminal = RunFailed(
                error=ErrorInfo(
                    code="internal_error", message=redact_text(f"{type(exc).__name__}: {exc}")
                )
            )
        finally:
            stored.put_nowait(None)
            await publisher
        if terminal is None:
            terminal = RunFailed(
                error=ErrorInfo(
                    code="internal_error", message="the run ended without a final event"
                )
            )
        try:
            active.publish(await journal.write(terminal, also=self._settler(active, run, terminal)))
        except Exception:
            logger.exception("could not persist the end of run %s", active.run_id)
            if journal.last_clean is not None and journal.last_clean.kind == terminal.kind:
                # Live streams still end (bench.load: with the storage pool exhausted they
                # otherwise waited for a final event that never came).
                active.publish((journal.seq, journal.last_clean))
        finally:
            self.active.pop(active.run_id, None)
            if self.on_finished is not None:
                self.on_finished(run.status if terminal.kind == "run_finished" else "failed")

    async def _publish_in_order(
        self, active: ActiveRun, stored: asyncio.Queue[Submitted | None]
    ) -> None:
        while (item := await stored.get()) is not None:
            seq, clean, committed = item
            try:
                await committed
            except Exception:
                # Still sent: a live client must not stall on an event storage refused.
                logger.exception("could not store event %d of run %s", seq, active.run_id)
            active.publish((seq, clean))

    def _settler(
        self, active: ActiveRun, run: ReactRun, terminal: RunEvent
    ) -> Callable[[AsyncSession], Awaitable[None]]:
        """Persist the conversation and the run's final state with the run's last event."""

        async def settle(session: AsyncSession) -> None:
            await ConversationRepository(session).add_messages(
                active.conversation_id, active.run_id, [message_row(m) for m in run.new_messages]
            )
            failed = isinstance(terminal, RunFailed)
            await RunRepository(session).finish(
                active.run_id,
                status="failed" if failed else run.status,
                iterations=run.iterations,
                usage=run.usage.to_dict(),
                error=terminal.error.model_dump() if isinstance(terminal, RunFailed) else None,
            )

        return settle

    # --- cancel --------------------------------------------------------------------------

    def _cancel_local(self, run_id: uuid.UUID) -> None:
        active = self.active.get(run_id)
        if active is not None:
            active.cancel.set()

    async def cancel(self, run_id: uuid.UUID, principal: Principal) -> Run:
        async with self.sessionmaker() as session:
            repo = RunRepository(session)
            run = principal.owned(await repo.get(run_id), "run", run_id)
            if run.status == "running":
                await repo.request_cancel(run_id)
                if not self.settings.is_sqlite:
                    await session.execute(
                        text("SELECT pg_notify(:c, :p)"),
                        {"c": CHANNEL, "p": f"{CANCEL_PREFIX}{run_id}"},
                    )
                await session.commit()
                run.cancel_requested = True
        self._cancel_local(run_id)
        return run

    async def aclose(self) -> None:
        """On shutdown: cancel what still runs and let each journal its end."""
        for active in list(self.active.values()):
            active.cancel.set()
        tasks = [a.task for a in self.active.values() if a.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await self.journal.aclose()
