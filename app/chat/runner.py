"""RunManager: starts runs as background tasks, journals their events, fans them out.

A run is not tied to the HTTP connection that started it: the POST /chat stream only
subscribes to it. A client disconnect drops the subscription; the task finishes, and the
journal keeps every event for replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.agents.models import Agent
from app.approvals.notify import ApprovalNotice
from app.approvals.stored import StoredApprovalGate
from app.chat.active import (
    ActiveRun,
    Published,
    Submitted,
    journal_unavailable,
    message_row,
)
from app.chat.hub import RunHub
from app.chat.journal import JournalBatcher, JournalWriter, is_transient
from app.chat.liveness import WorkerLiveness
from app.chat.loop import ReactRun, RunDeps, RunInput, RunResult
from app.chat.models import Run
from app.chat.pgwrite import Settle
from app.chat.repository import RunRepository
from app.chat.run_store import Deferred, Opened, RunStart, RunStartStore, agent_gone
from app.chat.run_store_pg import PostgresRunStore
from app.chat.run_store_session import SessionRunStore
from app.chat.schemas import ChatRequest
from app.chat.sqlitewrite import SqliteJournal
from app.config import Settings
from app.errors import Unavailable
from app.events import TERMINAL_KINDS, ErrorInfo, RunEvent, RunFailed
from app.llm.client import LlmClient
from app.llm.types import ChatMessage, Usage
from app.ops import tracing
from app.pipeline.mode import run_config
from app.pipeline.sources.backends import Backends
from app.security.redact import redact_text
from app.tenancy.principal import Principal

logger = logging.getLogger("quiver.runs")


class RunManager:
    """Runs on top of two parts: the run start store (`store`, see `run_store.py`) and this
    worker's liveness (`liveness`: heartbeats, lost runs, claims)."""

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
        on asyncpg connections of their own (`PostgresRunStore`, `app/chat/pgwrite.py`);
        None: through sessions (`SessionRunStore`). `notify_approval`: told of each new
        approval (the webhook sender's queue)."""
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
        self.journal = JournalBatcher(
            sessionmaker=sessionmaker,
            hub=hub,
            retry_s=settings.journal_retry_s,
            dsn=fast_dsn,
            sqlite=SqliteJournal(settings) if settings.is_sqlite else None,
        )
        hub.on_cancel = self._cancel_local
        self.liveness = WorkerLiveness(
            settings=settings,
            hub=hub,
            background=self.background,
            executing=self.active,
            cancel_local=self._cancel_local,
        )
        session_store = SessionRunStore(sessionmaker, self.liveness)
        self.store: RunStartStore = (
            PostgresRunStore(fast_dsn, session=session_store) if fast_dsn else session_store
        )
        self.draining_since: float | None = None
        """When this process began to drain (SIGTERM, `drain`): it starts no new run, and its
        running runs get `QUIVER_DRAIN_TIMEOUT_S` to finish before they are cancelled."""

    @property
    def worker_id(self) -> uuid.UUID:
        """This process, as the owner of the runs it executes (see `Worker`)."""
        return self.liveness.worker_id

    async def open(self) -> None:
        """Register this worker and keep it beating (see `WorkerLiveness.open`)."""
        await self.liveness.open()

    # --- start ---------------------------------------------------------------------------

    async def start(
        self, req: ChatRequest, principal: Principal, *, history: Sequence[ChatMessage] = ()
    ) -> tuple[ActiveRun, asyncio.Queue[Published]]:
        """Store the run and start executing it; returns once the run is stored.

        `history`: earlier messages a stateless client sent with this one (the OpenAI door);
        they open the new conversation, stored before the user's message.

        The store (`run_store.py`) stores the run before it executes, or defers it: the run
        then starts at once and stores itself with its first event (`_run`); alone, its model
        call goes out while that write runs. Its other events wait for it (`JournalWriter`'s
        `after`), so nothing is stored or sent before the run is, and the response (X-Run-Id)
        is sent once it is stored.
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
            raise agent_gone(req.agent_id)
        start = RunStart(
            run_id=uuid.uuid4(),
            agent_id=agent.id,
            principal=principal,
            message=req.message,
            conversation_id=req.conversation_id,
            history=history,
        )
        # Once stored, the run is not lost to the heartbeat before it executes.
        self.liveness.claim(start.run_id)
        try:
            opened = await self.store.open(start)
            active, queue, stored = self._launch(req, principal, agent, start.run_id, opened)
        finally:
            self.liveness.unclaim(start.run_id)
        if stored is not None:
            try:
                # Awaited as it is, not shielded (a shield is one more loop turn before the
                # answer, tens of ms in a burst of starts): a request that goes away cancels
                # `stored` too, and the run, which waits for it, is stopped all the same.
                await stored
            except BaseException:
                # Not stored (or the request went away meanwhile): the run does not go on. If
                # the write did commit after all, the heartbeat closes the run as lost.
                await self._abort(active)
                raise
        return active, queue

    def _launch(
        self,
        req: ChatRequest,
        principal: Principal,
        agent: Agent,
        run_id: uuid.UUID,
        opened: Opened,
    ) -> tuple[ActiveRun, asyncio.Queue[Published], asyncio.Future[None] | None]:
        """Execute the run; with a deferred store, also the future of its storing."""
        active = ActiveRun(run_id=run_id, conversation_id=opened.conversation_id)
        queue = active.subscribe()
        self.active[run_id] = active
        inp = RunInput(
            run_id=str(run_id),
            conversation_id=str(opened.conversation_id),
            agent=agent,
            message=req.message,
            history=opened.history,
            api_key_id=str(principal.key_id),
            user=principal.user,
        )
        stored: asyncio.Future[None] | None = None
        if opened.deferred is not None:
            stored = asyncio.get_running_loop().create_future()
        active.task = asyncio.create_task(
            self._execute(active, inp, deferred=opened.deferred, stored=stored),
            name=f"run-{run_id}",
        )
        return active, queue, stored

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
        self.liveness.unclaim(active.run_id)
        active.task = asyncio.create_task(
            self._execute(active, inp, keep_messages=keep_messages), name=f"run-{active.run_id}"
        )

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
        deferred: Deferred | None = None,
        stored: asyncio.Future[None] | None = None,
    ) -> None:
        """The run in its `invoke_agent` span (a child of the request's or the delegating tool
        call's span: the task was created in that context)."""
        with tracing.run_span(inp.agent.name, inp.run_id, inp.conversation_id):
            await self._run(
                active, inp, keep_messages=keep_messages, deferred=deferred, stored=stored
            )

    async def _run(
        self,
        active: ActiveRun,
        inp: RunInput,
        *,
        keep_messages: bool,
        deferred: Deferred | None,
        stored: asyncio.Future[None] | None,
    ) -> None:
        """`deferred`: the run is not stored yet. The run stores it with its first event
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
                elif deferred is not None and stored is not None:
                    # Alone, the run's model call goes out while it is stored; in a burst, the
                    # starts' writes and first events go first: a run's model call waits until
                    # its own first event is stored and sent.
                    if deferred.crowded:
                        deps.stored_first = True
                        deps.first_out = active.first_out
                    seq, clean, data = journal.first(event)
                    write = deferred.store((event.kind, data), stored)
                    outbox.put_nowait((seq, clean, write))
                    deferred = None
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
            if deferred is not None and stored is not None:  # ended before its first event
                deferred.store(None, stored)
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
            if run.status == "running" and not await self.liveness.executed_somewhere(session, run):
                # Its worker is gone: nothing would ever act on the request. Close it now.
                await self.liveness.close_lost(session, run_id)
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
        with contextlib.suppress(Exception):
            await self.store.aclose()
        await self.liveness.aclose()
