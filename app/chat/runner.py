"""RunManager: starts runs as background tasks, journals their events, fans them out.

A run is not tied to the HTTP connection that started it: the POST /chat stream only
subscribes to it. A client disconnect drops the subscription; the task finishes, and the
journal keeps every event for replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any, cast

import asyncpg
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.agents.models import Agent
from app.approvals.notify import ApprovalNotice
from app.approvals.repository import ApprovalRepository
from app.approvals.stored import StoredApprovalGate
from app.chat.hub import RunHub
from app.chat.journal import JournalBatcher, JournalWriter, copy_outcome, is_transient
from app.chat.loop import ReactRun, RunDeps, RunInput, RunResult
from app.chat.models import Message, Run
from app.chat.pgwrite import ContinuedRun, NewRun, RunStarts, Settle, StoredMessage
from app.chat.repository import ConversationRepository, RunRepository, WorkerRepository
from app.chat.schemas import ChatRequest
from app.config import Settings
from app.db.base import utcnow
from app.errors import Conflict, Invalid, NotFound, Unavailable
from app.events import TERMINAL_KINDS, ErrorInfo, RunEvent, RunFailed, event_payload
from app.llm.client import LlmClient
from app.llm.types import ChatMessage, Role, ToolCallRequest, Usage
from app.ops import tracing
from app.pipeline.mode import run_config
from app.pipeline.sources.backends import Backends
from app.security.redact import redact_text
from app.tenancy.limits import count_run_start
from app.tenancy.principal import Principal

logger = logging.getLogger("quiver.runs")
Published = tuple[int, RunEvent] | None
"""An event for live subscribers (None: the stream ends without a stored final event)."""
Submitted = tuple[int, RunEvent, "asyncio.Future[None]"]
FOREIGN_KEY_VIOLATION = "23503"


@dataclass(eq=False)
class ActiveRun:
    run_id: uuid.UUID
    conversation_id: uuid.UUID
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    subscribers: list[asyncio.Queue[Published]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    journal_failed: bool = False
    first_out: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the live stream that started the run has sent its first event (or ended
    without it): in a burst of starts the run's first model call waits for it."""

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


def journal_unavailable() -> RunFailed:
    return RunFailed(
        error=ErrorInfo(
            code="journal_unavailable",
            message="the run's events could not be stored; the run was stopped",
        )
    )


def lost_event() -> RunFailed:
    return RunFailed(
        error=ErrorInfo(
            code="run_lost", message="the process running this run stopped before it finished"
        )
    )


def history_from_rows(rows: Sequence[Message | StoredMessage]) -> list[ChatMessage]:
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


RESUMABLE_KINDS = frozenset({"mcp_session"})
"""Runs another worker can take over (sessions of the MCP endpoint): never closed as lost."""


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
        background: async_sessionmaker[AsyncSession] | None = None,
        agents: AgentCache | None = None,
        fast_dsn: str | None = None,
        notify_approval: Callable[[ApprovalNotice], None] | None = None,
    ) -> None:
        """`fast_dsn`: the app owns its Postgres store, so new runs and the journal are written
        on asyncpg connections of their own (`app/chat/pgwrite.py`); None: through sessions.
        `notify_approval`: told of each new approval (the webhook sender's queue)."""
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.hub = hub
        self.backends = backends
        self.llm = llm
        self.on_finished = on_finished
        self.notify_approval = notify_approval
        self.active: dict[uuid.UUID, ActiveRun] = {}
        self.background = background or sessionmaker
        self.agents = agents or AgentCache(sessionmaker)
        self.starts = RunStarts(fast_dsn, size=4) if fast_dsn else None
        self.journal = JournalBatcher(
            sessionmaker=sessionmaker,
            hub=hub,
            retry_s=settings.journal_retry_s,
            dsn=fast_dsn,
        )
        hub.on_cancel = self._cancel_local
        self.worker_id = uuid.uuid4()
        """This process, as the owner of the runs it executes (see `Worker`)."""
        self._claimed: set[uuid.UUID] = set()
        self.resumable: dict[str, Callable[[Run], Awaitable[None]]] = {}
        """Run kinds another worker can take over (MCP sessions): when no live worker holds
        such a run, the sweep asks its kind's handler (which ends it once idle) instead of
        closing it as lost."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._beating_since: float | None = None
        self.draining_since: float | None = None
        """When this process began to drain (SIGTERM, `drain`): it starts no new run, and its
        running runs get `QUIVER_DRAIN_TIMEOUT_S` to finish before they are cancelled."""

    def claim(self, run_id: uuid.UUID) -> None:
        """A run executed outside `start()` (an MCP session): not lost while it is claimed."""
        self._claimed.add(run_id)

    def unclaim(self, run_id: uuid.UUID) -> None:
        self._claimed.discard(run_id)

    # --- worker heartbeat and lost runs ---------------------------------------------------

    async def open(self) -> None:
        """Register this worker, close runs lost by dead ones, then keep beating."""
        try:
            await self.beat_and_sweep()
        except Exception:  # storage down at start-up: the heartbeat loop retries
            logger.exception("worker heartbeat failed")
        self._heartbeat = asyncio.create_task(self._beat_forever(), name="worker-heartbeat")

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.worker_heartbeat_s)
            try:
                await self.beat_and_sweep()
            except Exception:
                logger.exception("worker heartbeat failed")

    def _lost_before(self) -> datetime:
        return utcnow() - timedelta(seconds=self.settings.worker_lost_after_s)

    def _judging(self) -> bool:
        """May this worker declare others dead? Only after beating without a break for
        `worker_lost_after_s`: after a storage outage every heartbeat is old, and live
        workers need that long to beat again."""
        if self.settings.is_sqlite:
            return True
        since = self._beating_since
        return since is not None and time.monotonic() - since >= self.settings.worker_lost_after_s

    async def beat_and_sweep(self) -> None:
        try:
            async with self.background() as session:
                await WorkerRepository(session).beat(
                    self.worker_id, host=socket.gethostname(), pid=os.getpid()
                )
                await session.commit()
        except Exception:
            self._beating_since = None
            raise
        if self._beating_since is None:
            self._beating_since = time.monotonic()
        await self.hub.ensure_listening(self.settings)
        judging = self._judging()
        async with self.background() as session:
            repo = RunRepository(session)
            mine = await repo.running_of_worker(self.worker_id)
            lost = [r for r in mine if r.id not in self.active and r.id not in self._claimed]
            if judging:
                lost += await repo.orphaned(
                    me=self.worker_id,
                    lost_before=self._lost_before(),
                    only_worker_alive=self.settings.is_sqlite,
                )
        for run in mine:
            if run.cancel_requested:  # in case the cancel notification was missed
                self._cancel_local(run.id)
        for run in lost:
            if run.kind in RESUMABLE_KINDS:
                resumable = self.resumable.get(run.kind)
                try:  # not registered yet (starting up): left for a later sweep
                    if resumable is not None:
                        await resumable(run)
                except Exception:
                    logger.exception("could not sweep the %s run %s", run.kind, run.id)
                continue
            async with self.background() as session:
                await self._close_lost(session, run.id)
                await session.commit()
            self.hub.wake(run.id)
        if judging:
            async with self.background() as session:
                await WorkerRepository(session).forget_dead(lost_before=self._lost_before())
                await session.commit()

    async def _close_lost(self, session: AsyncSession, run_id: uuid.UUID) -> bool:
        """Journal `run_failed {code: run_lost}` and end the run (in the caller's transaction)."""
        event = lost_event()
        seq = await RunRepository(session).close_lost(run_id, event.kind, event_payload(event))
        if seq is None:
            return False
        # A call that waited for a person died with its worker: it can no longer run.
        await ApprovalRepository(session).close_pending(run_id, "cancelled")
        logger.warning("run %s was lost with its worker; closed as run_lost", run_id)
        await self.hub.announce(session, run_id)
        return True

    async def _executed_somewhere(self, session: AsyncSession, run: Run) -> bool:
        """Is a live worker executing this running run?"""
        if run.worker_id == self.worker_id:
            return run.id in self.active or run.id in self._claimed
        if self.settings.is_sqlite or run.worker_id is None:
            return False  # one process per SQLite store: nobody else runs it
        if not self._judging():
            return True
        return await WorkerRepository(session).alive(run.worker_id, lost_before=self._lost_before())

    # --- start ---------------------------------------------------------------------------

    async def _prepare(
        self,
        req: ChatRequest,
        principal: Principal,
        agent: Agent,
        run_id: uuid.UUID,
        history: Sequence[ChatMessage] = (),
    ) -> tuple[uuid.UUID, list[ChatMessage]]:
        """The run stored with the user's message, in an existing conversation or with a new
        one on the session path: (conversation id, history before this message)."""
        if (
            self.starts is not None
            and req.conversation_id is not None
            and self._unlimited(principal)
        ):
            # Continuing a conversation in one round trip; the session path tells apart why
            # it stored nothing (404, another agent's, 409, a run whose worker died).
            stored = await self.starts.continue_conversation(
                ContinuedRun(
                    run_id=run_id,
                    conversation_id=req.conversation_id,
                    agent_id=agent.id,
                    message=req.message,
                    api_key_id=principal.key_id,
                    user=principal.user,
                    admin=principal.admin,
                    worker_id=self.worker_id,
                )
            )
            if stored is not None:
                return req.conversation_id, history_from_rows(stored)
        async with self.sessionmaker() as session:
            try:
                conversation_id, earlier = await self._create_run(
                    session, agent, req, principal, run_id, history
                )
                await session.commit()
            except IntegrityError as exc:
                if getattr(exc.orig, "sqlstate", None) == FOREIGN_KEY_VIOLATION:
                    raise self._gone(req) from exc
                # The store allows one running run per conversation (all workers).
                raise self._busy() from exc
        return conversation_id, earlier

    def _unlimited(self, principal: Principal) -> bool:
        """No run count to keep for the key (a rate-limited one takes the session path)."""
        return principal.rate_limit_per_minute is None

    @staticmethod
    def _gone(req: ChatRequest) -> NotFound:
        """404 for the agent: unknown, not the key's, or deleted after it was read (a cached
        copy not yet dropped, or a concurrent delete)."""
        return NotFound(f"agent {str(req.agent_id)!r} not found")

    @staticmethod
    def _busy() -> Conflict:
        return Conflict(
            "a run is already in progress in this conversation; wait for it to "
            "finish or cancel it (POST /api/v1/runs/{run_id}/cancel)"
        )

    async def _create_run(
        self,
        session: AsyncSession,
        agent: Agent,
        req: ChatRequest,
        principal: Principal,
        run_id: uuid.UUID,
        sent: Sequence[ChatMessage] = (),
    ) -> tuple[uuid.UUID, list[ChatMessage]]:
        """The run and the user's message, stored together before the run starts (the
        session path: an existing conversation, a rate-limited key, SQLite, a client's
        history `sent` with the message)."""
        # First, before any row that references the key: its lock orders concurrent starts.
        # A refusal below rolls the count back with everything else.
        await count_run_start(session, principal)
        conversations = ConversationRepository(session)
        seq = 1
        if req.conversation_id is not None:
            locked = await conversations.lock(req.conversation_id)
            conversation = principal.owned(locked, "conversation", req.conversation_id)
            if conversation.agent_id != agent.id:
                raise Invalid("conversation_id: the conversation belongs to another agent")
            if await self._blocking_run(session, conversation.id):
                raise self._busy()
            rows = await conversations.messages(conversation.id)
            history = history_from_rows(rows)
            seq = rows[-1].seq + 1 if rows else 1
            conversation_id = conversation.id
        else:
            conversation_id = uuid.uuid4()
            created = await conversations.insert_for_agent(
                id=conversation_id,
                agent_id=agent.id,
                title=req.message[:80],
                api_key_id=principal.key_id,
                user=principal.user,
            )
            if not created:
                raise self._gone(req)  # deleted behind a cached copy
            history = list(sent)
        await RunRepository(session).insert(
            id=run_id,
            conversation_id=conversation_id,
            agent_id=agent.id,
            worker_id=self.worker_id,
            api_key_id=principal.key_id,
            user=principal.user,
        )
        new_rows = [message_row(m) for m in (*sent, ChatMessage.user(req.message))]
        await conversations.insert_messages(conversation_id, run_id, seq, new_rows)
        return conversation_id, history

    async def _blocking_run(self, session: AsyncSession, conversation_id: uuid.UUID) -> bool:
        """Is a run still in progress here? A run whose worker died is closed as lost
        (`run_failed {code: run_lost}`) instead of blocking the conversation."""
        run = await RunRepository(session).running_in_conversation(conversation_id)
        if run is None:
            return False
        if await self._executed_somewhere(session, run):
            return True
        await self._close_lost(session, run.id)
        return False

    async def start(
        self, req: ChatRequest, principal: Principal, *, history: Sequence[ChatMessage] = ()
    ) -> tuple[ActiveRun, asyncio.Queue[Published]]:
        """Store the run and start executing it; returns once the run is stored.

        `history`: earlier messages a stateless client sent with this one (the OpenAI door);
        they open the new conversation, stored before the user's message.

        A run in a new conversation (the common case) starts at once and stores itself with
        its first event (`_execute`); alone, its model call goes out while that write runs. Its
        other events wait for it (`JournalWriter`'s `after`), so nothing is stored or sent
        before the run is, and the response (X-Run-Id) is sent once it is stored.
        """
        assert not (history and req.conversation_id), "history opens a new conversation"
        if self.llm is None:
            raise Unavailable(
                "chat is unavailable: no LLM is configured (set QUIVER_LLM_BASE_URL, and "
                "QUIVER_LLM_API_KEY / QUIVER_LLM_MODEL as needed)"
            )
        if self.draining_since is not None:
            raise Unavailable("this gateway process is shutting down: send the request again")
        agent = await self.agents.get(req.agent_id)
        if agent is None or not principal.may_use(agent.id):
            raise self._gone(req)
        run_id = uuid.uuid4()
        if (
            self.starts is not None
            and req.conversation_id is None
            and not history
            and self._unlimited(principal)
        ):
            stored: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            new = NewRun(
                run_id=run_id,
                conversation_id=uuid.uuid4(),
                agent_id=agent.id,
                title=req.message[:80],
                message=req.message,
                api_key_id=principal.key_id,
                user=principal.user,
                worker_id=self.worker_id,
            )
            active, queue = self._launch(
                req, principal, agent, run_id, new.conversation_id, [], start=new, stored=stored
            )
            try:
                await asyncio.shield(stored)
            except BaseException as exc:
                # Not stored (or the request went away meanwhile): the run does not go on. If
                # the write did commit after all, the heartbeat closes the run as lost.
                await self._abort(active)
                if isinstance(exc, asyncpg.ForeignKeyViolationError):
                    raise self._gone(req) from exc  # deleted just now (a stale cached copy)
                raise
            return active, queue
        self._claimed.add(run_id)
        try:
            conversation_id, earlier = await self._prepare(req, principal, agent, run_id, history)
            return self._launch(req, principal, agent, run_id, conversation_id, earlier)
        finally:
            self._claimed.discard(run_id)

    def _launch(
        self,
        req: ChatRequest,
        principal: Principal,
        agent: Agent,
        run_id: uuid.UUID,
        conversation_id: uuid.UUID,
        history: list[ChatMessage],
        *,
        start: NewRun | None = None,
        stored: asyncio.Future[None] | None = None,
    ) -> tuple[ActiveRun, asyncio.Queue[Published]]:
        active = ActiveRun(run_id=run_id, conversation_id=conversation_id)
        queue = active.subscribe()
        self.active[run_id] = active
        inp = RunInput(
            run_id=str(run_id),
            conversation_id=str(conversation_id),
            agent=agent,
            message=req.message,
            history=history,
            api_key_id=str(principal.key_id),
            user=principal.user,
        )
        active.task = asyncio.create_task(
            self._execute(active, inp, start=start, stored=stored), name=f"run-{run_id}"
        )
        return active, queue

    async def _abort(self, active: ActiveRun) -> None:
        """Stop a run whose row was not stored (nothing of it was journaled or sent)."""
        task = active.task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})  # its outcome is known: not stored
        self.active.pop(active.run_id, None)
        self.journal.release(active.run_id)

    def adopt(self, active: ActiveRun, inp: RunInput, *, keep_messages: bool = True) -> None:
        """Execute a run whose row the caller stored and claimed (a delegation's child run,
        `chat/delegation.py`); `keep_messages=False` keeps its messages out of the
        conversation (they stay in its journal)."""
        self.active[active.run_id] = active
        self._claimed.discard(active.run_id)
        active.task = asyncio.create_task(
            self._execute(active, inp, keep_messages=keep_messages), name=f"run-{active.run_id}"
        )

    def _starts(self) -> RunStarts:
        assert self.starts is not None, "only runs started on the Postgres fast path"
        return self.starts

    def _llm(self) -> LlmClient:
        assert self.llm is not None, "start() refuses runs without an LLM"
        return self.llm

    # --- execute -------------------------------------------------------------------------

    async def _execute(
        self,
        active: ActiveRun,
        inp: RunInput,
        *,
        keep_messages: bool = True,
        start: NewRun | None = None,
        stored: asyncio.Future[None] | None = None,
    ) -> None:
        """The run in its `invoke_agent` span (a child of the request's or the delegating tool
        call's span: the task was created in that context)."""
        with tracing.run_span(inp.agent.name, inp.run_id, inp.conversation_id):
            await self._run(active, inp, keep_messages=keep_messages, start=start, stored=stored)

    async def _run(
        self,
        active: ActiveRun,
        inp: RunInput,
        *,
        keep_messages: bool,
        start: NewRun | None,
        stored: asyncio.Future[None] | None,
    ) -> None:
        """`start`: the run is not stored yet. The run stores it with its first event
        (`run_started`, once the toolset is assembled) and settles `stored` when that write
        is done; its model call goes out meanwhile, its later events wait for `stored`."""
        journal = JournalWriter(run_id=active.run_id, batcher=self.journal, after=stored)
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
                notify=self.notify_approval,
                agent=(inp.agent.id, inp.agent.name),
            ),
            stored=stored,
        )
        run = ReactRun(deps=deps, inp=inp)
        terminal: RunEvent | None = None
        result = RunResult(status="failed", new_messages=[], iterations=0, usage=Usage())
        # The loop does not wait for the journal: events are queued for storage in order, and
        # a publisher sends each one as soon as it is committed.
        outbox: asyncio.Queue[Submitted | None] = asyncio.Queue()
        publisher = asyncio.create_task(self._publish_in_order(active, outbox))
        try:
            config = run_config(inp.agent.model_config_json, self.settings)  # once per run
            async for event in run.events(config):
                if isinstance(event, RunResult):
                    result = event
                elif event.kind in TERMINAL_KINDS:
                    terminal = event  # written after the conversation is persisted
                elif start is not None and stored is not None:
                    # Alone, the run's model call goes out while it is stored; in a burst, the
                    # starts' writes and first events go first: a run's model call waits until
                    # its own first event is stored and sent.
                    if self._starts().pending > 0:
                        deps.stored_first = True
                        deps.first_out = active.first_out
                    seq, clean, data = journal.first(event)
                    write = self._store_start(start, stored, (event.kind, data))
                    outbox.put_nowait((seq, clean, write))
                    start = None
                else:
                    outbox.put_nowait(journal.submit(event))
        except Exception as exc:  # the run's one exception boundary: journal it, typed
            logger.exception("run %s failed", active.run_id)
            terminal = RunFailed(
                error=ErrorInfo(
                    code="internal_error", message=redact_text(f"{type(exc).__name__}: {exc}")
                )
            )
        finally:
            if start is not None and stored is not None:  # ended before its first event
                self._store_start(start, stored, None)
            outbox.put_nowait(None)
            await publisher
        if active.journal_failed:
            terminal = journal_unavailable()
        if terminal is None:
            terminal = RunFailed(
                error=ErrorInfo(
                    code="internal_error", message="the run ended without a final event"
                )
            )
        tracing.end_run(
            result.status if terminal.kind == "run_finished" else "failed",
            terminal.error.code if isinstance(terminal, RunFailed) else None,
        )
        try:
            try:
                active.publish(
                    await journal.write(
                        terminal,
                        also=self._settler(active, result, terminal, messages=keep_messages),
                    )
                )
            except Exception as exc:
                logger.exception("could not persist the end of run %s", active.run_id)
                if is_transient(exc):
                    raise  # storage stayed away: trying again now would only wait as long
                # Without the conversation's new messages (one may be what storage refuses).
                terminal = journal_unavailable()
                settle = self._settler(active, result, terminal, messages=False)
                active.publish(await journal.write(terminal, also=settle))
        except Exception:
            # Live streams end without it (a client never sees an event that is not stored);
            # the heartbeat closes the run as lost once storage answers again.
            logger.exception("could not persist the failure of run %s", active.run_id)
            active.publish(None)
        finally:
            if stored is not None and not stored.done():  # never left the handler waiting
                stored.set_exception(RuntimeError("the run stopped before it was stored"))
            self.active.pop(active.run_id, None)
            self.journal.release(active.run_id)
            if self.on_finished is not None:
                self.on_finished(result.status if terminal.kind == "run_finished" else "failed")

    def _store_start(
        self,
        start: NewRun,
        stored: asyncio.Future[None],
        first: tuple[str, dict[str, Any]] | None,
    ) -> asyncio.Future[None]:
        """Store the run with its first event (None: it ended before one); `stored` is
        settled as that write is."""
        write = self._starts().submit(replace(start, event=first))
        write.add_done_callback(partial(copy_outcome, stored))
        return write

    async def _publish_in_order(
        self, active: ActiveRun, stored: asyncio.Queue[Submitted | None]
    ) -> None:
        """Send each event once it is committed. When one cannot be stored, nothing after it
        is sent and the run is stopped: it ends with `run_failed {code: journal_unavailable}`."""
        while (item := await stored.get()) is not None:
            seq, clean, committed = item
            try:
                await committed
            except Exception:
                if not active.journal_failed:
                    logger.exception("could not store event %d of run %s", seq, active.run_id)
                    active.journal_failed = True
                    active.cancel.set()
                continue
            if not active.journal_failed:
                active.publish((seq, clean))

    def _settler(
        self, active: ActiveRun, run: RunResult, terminal: RunEvent, *, messages: bool = True
    ) -> Settle:
        """The conversation's new messages and the run's final state, stored with the run's
        last event."""
        # The user's message was stored when the run started.
        replies = run.new_messages if messages else []
        if replies and replies[0].role == "user":
            replies = replies[1:]
        failed = isinstance(terminal, RunFailed)
        return Settle(
            run_id=active.run_id,
            conversation_id=active.conversation_id,
            messages=[message_row(m) for m in replies],
            status="failed" if failed else run.status,
            iterations=run.iterations,
            usage=run.usage.to_dict(),
            error=terminal.error.model_dump() if isinstance(terminal, RunFailed) else None,
        )

    # --- cancel --------------------------------------------------------------------------

    def _cancel_local(self, run_id: uuid.UUID) -> None:
        active = self.active.get(run_id)
        if active is not None:
            active.cancel.set()

    async def cancel(self, run_id: uuid.UUID, principal: Principal) -> Run:
        async with self.sessionmaker() as session:
            repo = RunRepository(session)
            run = principal.owned(await repo.get(run_id), "run", run_id)
            if run.status == "running" and not await self._executed_somewhere(session, run):
                # Its worker is gone: nothing would ever act on the request. Close it now.
                await self._close_lost(session, run_id)
                await session.commit()
                await session.refresh(run)
                self.hub.wake(run_id)
                return run
            if run.status == "running":
                await repo.request_cancel(run_id)
                await self.hub.announce_cancel(session, run_id)
                await session.commit()
                run.cancel_requested = True
        self._cancel_local(run_id)
        return run

    def drain(self) -> None:
        """Stop starting runs here (readiness turns false); running ones may finish."""
        if self.draining_since is None:
            self.draining_since = time.monotonic()

    async def aclose(self) -> None:
        """On shutdown: let running runs finish within what is left of the drain timeout,
        then cancel what still runs and let each journal its end (`run_finished
        {status: cancelled}`: replayable from any process, never lost)."""
        self.drain()
        assert self.draining_since is not None
        left = self.settings.drain_timeout_s - (time.monotonic() - self.draining_since)
        tasks = [a.task for a in self.active.values() if a.task is not None]
        if tasks and left > 0:
            await asyncio.wait(tasks, timeout=left)
        for active in list(self.active.values()):
            active.cancel.set()
        tasks = [a.task for a in self.active.values() if a.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10)
        await self.journal.aclose()
        if self.starts is not None:
            with contextlib.suppress(Exception):
                await self.starts.aclose()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat
        with contextlib.suppress(Exception):
            async with self.background() as session:
                if not await RunRepository(session).running_of_worker(self.worker_id):
                    await WorkerRepository(session).forget(self.worker_id)
                    await session.commit()
