"""MCP sessions as journal runs: one session = one run of kind `mcp_session`.

A session keeps the agent's assembled tool set (with what `request_tools` loaded) and a
`ToolPhase`, so every `tools/call` goes through the chat run's validation, guards,
executors, timeout, progress tracker, redaction and audit. Each call journals a
`tool_call` and a `tool_result` event, both stored before the answer goes out (in one write
when the call is quick, see `CALL_HELD_S`); the end of the session journals `run_finished`.

Any worker can serve any session: what a session needs lives in the journal or comes with the
request. The session id names the run (its hex id, plus `e` when the client declared
elicitation at `initialize`); the run row holds the agent and the key; the `tools_loaded`
events hold what `request_tools` loaded. A worker that gets a request for a session it does not
hold, or one another worker served since, rebuilds the session from the journal and records
itself on the run (`worker_id`). Only the worker that served a session last ends it when it goes
idle; a session whose worker is gone ends once it has been idle that long (see
`McpSessions.sweep`). Shutting a worker down hands its sessions over instead of ending them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.approvals.gate import ApprovalGate
from app.audit.models import ToolCall
from app.chat.journal import JournalWriter
from app.chat.models import Conversation, Run, RunEventRecord
from app.chat.repository import RUNNING, RunRepository
from app.chat.runner import RunManager
from app.chat.steps import PhaseResult
from app.chat.tool_phase import ToolPhase
from app.db.base import utcnow
from app.events import (
    RunEvent,
    RunFinished,
    RunStarted,
    ToolCallEvent,
    ToolResultEvent,
    ToolsLoaded,
    event_payload,
)
from app.llm.types import ChatMessage, ToolCallRequest
from app.mcpserver.approval import NO_ELICITATION
from app.pipeline.assemble import assemble_toolset
from app.pipeline.toolset import AssembledToolset
from app.tenancy.limits import count_run_start
from app.tenancy.principal import Principal
from app.tools.base import CallContext

logger = logging.getLogger("quiver.mcp_server")
RUN_KIND = "mcp_session"
CALL_HELD_S = 0.05
"""A `tool_call` event waits this long for its result, to be journaled with it in one write."""
_ELICITS = "e"
"""Session-id suffix: the client declared elicitation (it asks its person for approvals)."""


_ADMIT = """
WITH r AS (
    SELECT worker_id FROM runs
    WHERE id = $1 AND kind = $7 AND status = 'running' AND agent_id = $4
      AND api_key_id IS NOT DISTINCT FROM $5
), u AS (
    UPDATE runs SET worker_id = $2, updated_at = $3
    WHERE id = $1 AND status = 'running' AND EXISTS (SELECT 1 FROM r)
      AND (worker_id IS DISTINCT FROM $2 OR updated_at < $6)
)
SELECT true AS ok, r.worker_id FROM r
"""
"""`McpSessions.admit` on Postgres in one round trip: the session's run (open, of this agent
and key) and the worker that served it last (the snapshot before the UPDATE), which records
this worker and the activity (coarsely: only when older than $6)."""


def session_id_for(run_id: uuid.UUID, *, elicitation: bool) -> str:
    """The `Mcp-Session-Id` of a session: its run's id, and what the client can do."""
    return run_id.hex + (_ELICITS if elicitation else "")


def parse_session_id(session_id: str) -> tuple[uuid.UUID, bool] | None:
    """(run id, client elicits) of a session id this gateway issued, else None."""
    elicits = session_id.endswith(_ELICITS) and len(session_id) == 33
    raw = session_id[:32] if elicits else session_id
    if len(raw) != 32:
        return None
    try:
        return uuid.UUID(hex=raw), elicits
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class CallOutcome:
    text: str
    ok: bool
    loaded: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Caller:
    """Who opened (or continues) a session: the agent of the URL and the bearer key."""

    agent: Agent
    principal: Principal


class HeldAudit:
    """A session's tool-call audit rows, held until they are journaled with the call's events
    (one write instead of a write of their own)."""

    def __init__(self) -> None:
        self.rows: list[ToolCall] = []

    def record(self, row: ToolCall) -> None:
        self.rows.append(row)

    def take(self) -> list[ToolCall]:
        rows, self.rows = self.rows, []
        return rows


@dataclass(eq=False, kw_only=True)
class McpSession:
    """One client session: its run, its tools and its journal."""

    session_id: str
    run_id: uuid.UUID
    agent: Agent
    principal: Principal
    toolset: AssembledToolset
    phase: ToolPhase
    journal: JournalWriter
    audit: HeldAudit
    calls: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Events of one session are journaled in call order."""

    def belongs_to(self, agent_id: uuid.UUID, key_id: uuid.UUID) -> bool:
        """A session is used with the agent and the key that opened it (else: not found)."""
        return self.agent.id == agent_id and self.principal.key_id == key_id


async def assemble_for_mcp(agent: Agent, runs: RunManager) -> AssembledToolset:
    """What `GET /agents/{id}/toolset` shows with no message: no runtime (LLM) selection."""
    return await assemble_toolset(agent, runs.settings, runs.backends, "")


class McpSessions:
    """The sessions this process holds (their runs are claimed from the lost-run sweep)."""

    def __init__(self, runs: RunManager) -> None:
        self.runs = runs
        self.sessions: dict[str, McpSession] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self.handing_over = False
        """Set at shutdown: sessions that end here now are left for another worker."""
        self._tasks: set[asyncio.Task[None]] = set()
        runs.resumable[RUN_KIND] = self.sweep

    @property
    def idle_s(self) -> float:
        return self.runs.settings.mcp_session_idle_s

    def get(self, session_id: str) -> McpSession | None:
        return self.sessions.get(session_id)

    # --- which worker serves a session --------------------------------------------------

    async def admit(
        self, db: AsyncSession, session_id: str, *, agent_id: uuid.UUID, key_id: uuid.UUID
    ) -> bool:
        """May this request continue the session?

        The session's run must be open, of this agent and this key. The run records the
        worker that serves the session last: when that was another one, this worker takes it
        over and rebuilds the session from the journal (what it holds may be stale). On a
        Postgres store the app owns this is one autocommit statement (`_ADMIT`); otherwise it
        runs in the caller's transaction `db`."""
        parsed = parse_session_id(session_id)
        if parsed is None:
            return False
        run_id = parsed[0]
        me = self.runs.worker_id
        if self.runs.starts is not None:  # Postgres: one statement, no ORM
            quiet = utcnow() - timedelta(seconds=self._touch_every_s)
            found = await self.runs.starts.fetchrow(
                _ADMIT, run_id, me, utcnow(), agent_id, key_id, quiet, RUN_KIND
            )
            if found is None or not found["ok"]:
                return False
            self._moved(session_id, moved=found["worker_id"] != me)
            return True
        stmt = select(
            Run.kind, Run.status, Run.agent_id, Run.api_key_id, Run.worker_id, Run.updated_at
        ).where(Run.id == run_id)
        row = (await db.execute(stmt)).one_or_none()
        if row is None or (row.kind, row.status) != (RUN_KIND, RUNNING):
            return False
        if row.agent_id != agent_id or row.api_key_id != key_id:
            return False
        moved = row.worker_id != me
        # Activity is recorded coarsely (the sweep's idle clock), ownership at every move.
        seen = _aware(row.updated_at)
        if moved or (utcnow() - seen).total_seconds() > self._touch_every_s:
            await db.execute(
                update(Run)
                .where(Run.id == run_id, Run.status == RUNNING)
                .values(worker_id=me, updated_at=utcnow())
            )
        self._moved(session_id, moved=moved)
        return True

    @property
    def _touch_every_s(self) -> float:
        return min(60.0, self.idle_s / 10)

    def _moved(self, session_id: str, *, moved: bool) -> None:
        """Another worker served the session since this one did: what it holds is stale."""
        if moved:
            stale = self.sessions.pop(session_id, None)
            if stale is not None:
                self._later(self._release_after_calls(stale))

    def _later(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- opening and resuming -----------------------------------------------------------

    async def open(self, session_id: str, caller: Caller) -> McpSession:
        """The session's state: the one this worker holds, or rebuilt from the journal."""
        lock = self._opening.setdefault(session_id, asyncio.Lock())
        async with lock:
            existing = self.sessions.get(session_id)
            if existing is not None:
                return existing
            state = await self.resume(session_id, caller)
            self.sessions[session_id] = state
            return state

    async def start(self, caller: Caller, *, elicitation: bool) -> McpSession:
        """Create the session's run (counted against the key's run rate) and journal
        `run_started`; `QuiverError`s (429) come before any MCP exchange. The state is held
        here under its session id at once (`drop` it if no session comes of it)."""
        agent, principal = caller.agent, caller.principal
        run_id = uuid.uuid4()
        self.runs.claim(run_id)
        try:
            async with self.runs.sessionmaker() as session:
                await count_run_start(session, principal)
                conversation = Conversation(
                    agent_id=agent.id,
                    title="MCP session",
                    api_key_id=principal.key_id,
                    user=principal.user,
                )
                session.add(conversation)
                await session.flush()
                session.add(
                    Run(
                        id=run_id,
                        kind=RUN_KIND,
                        conversation_id=conversation.id,
                        agent_id=agent.id,
                        worker_id=self.runs.worker_id,
                        api_key_id=principal.key_id,
                        user=principal.user,
                    )
                )
                await session.commit()
            toolset = await assemble_for_mcp(agent, self.runs)
        except BaseException:
            self.runs.unclaim(run_id)
            raise
        state = self._state(session_id_for(run_id, elicitation=elicitation), caller, toolset)
        await state.journal.write(
            RunStarted(
                run_id=str(run_id),
                conversation_id=str(conversation.id),
                agent_id=str(agent.id),
                modes=toolset.modes.as_dict(),
                tools=[t.name for t in toolset.tools],
            )
        )
        self.sessions[state.session_id] = state
        logger.info("MCP session opened as run %s", run_id)
        return state

    async def resume(self, session_id: str, caller: Caller) -> McpSession:
        """Rebuild a session another worker opened (or served since) from its run's journal:
        the tools `request_tools` loaded, the number of calls, the next event number."""
        parsed = parse_session_id(session_id)
        if parsed is None:
            raise LookupError(session_id)
        run_id = parsed[0]
        self.runs.claim(run_id)
        try:
            async with self.runs.sessionmaker() as db:
                events = RunEventRecord.run_id == run_id
                last = await db.scalar(select(func.max(RunEventRecord.seq)).where(events))
                calls = await db.scalar(
                    select(func.count()).where(events, RunEventRecord.kind == "tool_call")
                )
                loaded = (
                    await db.scalars(
                        select(RunEventRecord.data)
                        .where(events, RunEventRecord.kind == "tools_loaded")
                        .order_by(RunEventRecord.seq)
                    )
                ).all()
            toolset = await assemble_for_mcp(caller.agent, self.runs)
        except BaseException:
            self.runs.unclaim(run_id)
            raise
        for data in loaded:
            toolset.activate(data.get("names") or [])
        state = self._state(session_id, caller, toolset, calls=int(calls or 0))
        state.journal.seq = int(last or 0)
        logger.info("MCP session of run %s resumed on this worker", run_id)
        return state

    def _state(
        self, session_id: str, caller: Caller, toolset: AssembledToolset, *, calls: int = 0
    ) -> McpSession:
        agent, principal = caller.agent, caller.principal
        run_id = uuid.UUID(hex=session_id[:32])
        settings = self.runs.settings
        audit = HeldAudit()
        ctx = CallContext(
            run_id=str(run_id),
            agent_id=str(agent.id),
            api_key_id=str(principal.key_id),
            user=principal.user,
        )
        return McpSession(
            session_id=session_id,
            run_id=run_id,
            agent=agent,
            principal=principal,
            toolset=toolset,
            calls=calls,
            phase=ToolPhase(
                toolset=toolset,
                ctx=ctx,
                timeout_s=settings.tool_timeout_s,
                step_iteration=toolset.config.step_iteration,
                audit=audit,
                approval=toolset.config.approval,
                no_gate_error=NO_ELICITATION,
            ),
            journal=JournalWriter(run_id=run_id, batcher=self.runs.journal),
            audit=audit,
        )

    # --- calls ---------------------------------------------------------------------------

    async def call(
        self,
        state: McpSession,
        name: str,
        arguments: dict[str, Any],
        *,
        gate: ApprovalGate | None = None,
    ) -> CallOutcome:
        """One `tools/call`, exactly as a chat run's tool phase runs it, journaled. A call that
        needs a person's approval asks `gate` (the client's elicitation), or fails without it."""
        async with state.lock:
            state.phase.gate = gate
            state.calls += 1
            call = ToolCallRequest(
                id=f"mcp_{state.calls}", name=name, arguments=json.dumps(arguments)
            )
            messages: list[ChatMessage] = []
            events: list[RunEvent] = []
            held: list[RunEvent] = []
            stored: list[asyncio.Future[None]] = []
            audited: list[ToolCall] = []
            timer: asyncio.TimerHandle | None = None

            def submit() -> None:  # queued in order, the held ones first
                nonlocal timer
                if timer is not None:
                    timer.cancel()
                    timer = None
                for event in held:  # the audit rows so far go with the last one
                    audit = state.audit.take() if event is held[-1] else []
                    audited.extend(audit)
                    stored.append(state.journal.submit(event, audit=audit)[2])
                held.clear()

            try:
                async for event in state.phase.run([call], state.calls, messages):
                    if isinstance(event, PhaseResult):
                        continue  # the observation is in `messages`
                    events.append(event)
                    held.append(event)
                    if isinstance(event, ToolCallEvent) and len(held) == 1:
                        # Stored with its result (one statement) unless the call takes longer:
                        # then on its own, so the journal shows the call in flight.
                        timer = asyncio.get_running_loop().call_later(CALL_HELD_S, submit)
                    else:
                        submit()
            finally:
                submit()  # whatever happened so far, interrupted or not
            for row in state.audit.take():  # recorded after the last event (none so far)
                self._audit_sink(row)
            try:
                await asyncio.gather(*stored)  # the answer goes out once its events are stored
            except Exception:
                for row in audited:  # the call ran: its audit row is kept all the same
                    self._audit_sink(row)
                raise
        ok = any(isinstance(e, ToolResultEvent) and e.ok for e in events)
        loaded = tuple(n for e in events if isinstance(e, ToolsLoaded) for n in e.names)
        text = (messages[-1].content or "") if messages else ""
        return CallOutcome(text=text, ok=ok, loaded=loaded)

    def _audit_sink(self, row: ToolCall) -> None:
        sink = self.runs.backends.tool_audit
        if sink is not None:
            sink.record(row)

    # --- ending --------------------------------------------------------------------------

    async def close(self, session_id: str) -> None:
        """The client ended the session (DELETE): its run finishes, whoever held it."""
        state = self.sessions.pop(session_id, None)
        self._opening.pop(session_id, None)
        parsed = parse_session_id(session_id)
        if state is not None:
            async with state.lock:  # the events of a call in flight come first
                await self._finish(state.run_id)
            await self._release(state)
        elif parsed is not None:
            await self._finish(parsed[0])

    async def ended_here(self, session_id: str) -> None:
        """The transport of a session ended in this process (idle timeout, DELETE, shutdown).

        Idle: the run finishes if this worker served the session last (else another one
        serves it now). At shutdown the session is left for another worker to resume."""
        state = self.sessions.pop(session_id, None)
        self._opening.pop(session_id, None)
        parsed = parse_session_id(session_id)
        try:
            if parsed is not None and not self.handing_over:
                async with self.runs.sessionmaker() as db:
                    worker = await db.scalar(
                        select(Run.worker_id).where(Run.id == parsed[0], Run.status == RUNNING)
                    )
                if worker == self.runs.worker_id:
                    if state is not None:
                        async with state.lock:
                            await self._finish(parsed[0])
                    else:
                        await self._finish(parsed[0])
        except Exception:
            logger.exception("could not end the MCP session of run %s", session_id[:32])
        finally:
            if state is not None:
                await self._release(state)

    async def drop(self, state: McpSession) -> None:
        """No session came of an opening request: its run ends at once."""
        self.sessions.pop(state.session_id, None)
        await self._finish(state.run_id)
        await self._release(state)

    async def sweep(self, run: Run) -> None:
        """A session no live worker holds (its worker died or handed it over): it ends once
        it has been idle for `mcp_session_idle_s`, like one a worker holds."""
        async with self.runs.sessionmaker() as db:
            latest = await db.scalar(
                select(func.max(RunEventRecord.created_at)).where(RunEventRecord.run_id == run.id)
            )
        seen = max(_aware(run.updated_at), _aware(latest or run.updated_at))
        if (utcnow() - seen).total_seconds() >= self.idle_s:
            await self._finish(run.id)

    async def _finish(self, run_id: uuid.UUID) -> None:
        """Journal `run_finished` after the run's last event and settle it: once, however
        many workers try (the UPDATE is guarded by the run still running)."""
        try:
            async with self.runs.sessionmaker() as db:
                created = await db.scalar(select(Run.created_at).where(Run.id == run_id))
                events = RunEventRecord.run_id == run_id
                calls = int(
                    await db.scalar(
                        select(func.count()).where(events, RunEventRecord.kind == "tool_call")
                    )
                    or 0
                )
                closed = await db.execute(
                    update(Run)
                    .where(Run.id == run_id, Run.status == RUNNING)
                    .values(
                        status="completed",
                        iterations=calls,
                        usage={},
                        finished_at=utcnow(),
                        updated_at=utcnow(),
                    )
                )
                if getattr(closed, "rowcount", 0) != 1:
                    return  # already finished (another worker, DELETE and idle at once)
                elapsed = (utcnow() - _aware(created or utcnow())).total_seconds()
                event = RunFinished(
                    status="completed",
                    iterations=calls,
                    usage={},
                    elapsed_ms=round(elapsed * 1000, 2),
                )
                seq = int(await db.scalar(select(func.max(RunEventRecord.seq)).where(events)) or 0)
                await RunRepository(db).append_event(
                    run_id, seq + 1, event.kind, event_payload(event)
                )
                await self.runs.hub.announce(db, run_id)
                await db.commit()
            self.runs.hub.wake(run_id)
        except Exception:
            logger.exception("could not finish the run %s of an MCP session", run_id)

    async def _release_after_calls(self, state: McpSession) -> None:
        async with state.lock:
            await self._release(state)

    async def _release(self, state: McpSession) -> None:
        """Let go of what this worker held for the session (the run goes on, or is over)."""
        self.runs.journal.release(state.run_id)
        self.runs.unclaim(state.run_id)
        with contextlib.suppress(Exception):
            await state.toolset.aclose()

    async def aclose(self) -> None:
        """Shutdown: the sessions stay open for other workers (or this one after a restart)."""
        self.handing_over = True
        self.runs.resumable.pop(RUN_KIND, None)
        for session_id in list(self.sessions):
            state = self.sessions.pop(session_id)
            async with state.lock:
                await self._release(state)
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
