"""MCP sessions as journal runs: one session = one run of kind `mcp_session`.

A session keeps the agent's assembled tool set (with what `request_tools` loaded) and a
`ToolPhase`, so every `tools/call` goes through the chat run's validation, guards,
executors, timeout, progress tracker, redaction and audit (`calls.py`); the end of the
session journals `run_finished`.

Any worker can serve any session: what a session needs lives in the journal or comes with the
request. The session id names the run (`state.py`); the run row holds the agent and the key;
the `tools_loaded` events hold what `request_tools` loaded. A worker that gets a request for a
session it does not hold, or one another worker served since, rebuilds the session from the
journal and records itself on the run (`worker_id`). On Postgres one worker at a time holds a
session, under a lease in its run row: it serves the session without reading the run
meanwhile, and lets go when another worker asks, once the requests it admitted are over
(`holds.py`). Only the worker that served a session
last ends it when it goes idle; a session whose worker is gone ends once it has been idle that
long (see `McpSessions.sweep`). Shutting a worker down hands its sessions over instead of
ending them. A call a dead worker left in flight gets an error result when the session is
taken over (or ends). Every SQL statement is in `store.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.gate import ApprovalGate
from app.audit.record import AuditRow
from app.chat.journal import JournalWriter
from app.chat.models import Run
from app.chat.runner import RunManager
from app.chat.tool_phase import ToolPhase
from app.db.base import utcnow
from app.events import RunStarted
from app.mcpserver.approval import NO_ELICITATION
from app.mcpserver.calls import SessionReleased, run_call
from app.mcpserver.holds import Holds, SessionBusy
from app.mcpserver.state import (
    RUN_KIND,
    Caller,
    CallOutcome,
    HeldAudit,
    McpSession,
    assemble_for_mcp,
    parse_session_id,
    session_id_for,
)
from app.mcpserver.store import SessionStore, lost_result
from app.pipeline.toolset import AssembledToolset
from app.tools.base import CallContext

logger = logging.getLogger("quiver.mcp_server")


class McpSessions:
    """The sessions this process holds (their runs are claimed from the lost-run sweep)."""

    def __init__(self, runs: RunManager) -> None:
        self.runs = runs
        self.store = SessionStore(runs)
        self.sessions: dict[str, McpSession] = {}
        self._opening: dict[uuid.UUID, asyncio.Lock] = {}
        """By run: one state of a session is made at a time."""
        self.holds = Holds()
        self._taken_from: dict[str, uuid.UUID | None] = {}
        """Sessions this worker took over, by the worker that served them before."""
        self.handing_over = False
        """Set at shutdown: sessions that end here now are left for another worker."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._renewer: asyncio.Task[None] | None = None
        runs.liveness.resumable[RUN_KIND] = self.sweep
        runs.hub.on_release = self._on_release

    @property
    def idle_s(self) -> float:
        return self.runs.settings.mcp_session_idle_s

    def get(self, session_id: str) -> McpSession | None:
        return self.sessions.get(session_id)

    # --- which worker serves a session --------------------------------------------------

    async def admit(
        self, db: AsyncSession, session_id: str, *, agent_id: uuid.UUID, key_id: uuid.UUID
    ) -> bool:
        """May this request continue the session? If so, the request is counted as served
        here until `leave` (the session is not let go of under it).

        The session's run must be open, of this agent and this key, and held by this worker.
        Within the lease it took (Postgres) a held session is served without reading its run
        (`McpSession.checked_until`); past half of it, the run is read again and the lease
        renewed. A session another worker holds is asked for (`acquire`). When another worker
        served the session since, this one rebuilds it from the journal."""
        parsed = parse_session_id(session_id)
        if parsed is None:
            return False
        run_id = parsed[0]
        while (letting_go := self.holds.letting_go(run_id)) is not None:
            held = self.sessions.get(session_id)
            if not self.holds.releasing(run_id) and held is not None and held.lock.locked():
                break  # a call in flight here keeps the session; it may wait for this request
            await letting_go.wait()  # the requests admitted before go first, then the release
        held = self.sessions.get(session_id)
        if held is not None and not held.released and time.monotonic() < held.checked_until:
            if not held.belongs_to(agent_id, key_id):
                return False
            self.holds.enter(run_id)
            return True
        self.holds.enter(run_id)  # no release while the lease is being taken
        try:
            admitted = await self.acquire(db, session_id, run_id, agent_id=agent_id, key_id=key_id)
        except BaseException:
            self.leave(run_id)
            raise
        if not admitted:
            self.leave(run_id)
        return admitted

    def leave(self, run_id: uuid.UUID) -> None:
        """A request `admit` let in is over."""
        self.holds.leave(run_id)

    async def acquire(
        self,
        db: AsyncSession | None,
        session_id: str,
        run_id: uuid.UUID,
        *,
        agent_id: uuid.UUID,
        key_id: uuid.UUID,
    ) -> bool:
        """Take (or renew) the session's lease; while another worker holds it, ask that one
        once to let go and wait for it (or for its lease to run out: its worker died) for at
        most one lease and a second, then 503. A holder is asked once: it lets go once the
        requests it admitted are done, and asking again would only make it let go again
        of a session it took back meanwhile."""
        deadline = time.monotonic() + self.lease_s + 1.0
        asked: set[uuid.UUID | None] = set()
        while True:
            sent = time.monotonic()
            waiter = self.runs.hub.waiter(run_id)  # before asking: the answer may come at once
            try:
                admitted = await self.store.admit(
                    db, run_id, agent_id=agent_id, key_id=key_id, touch_every_s=self._touch_every_s
                )
                if admitted is None:
                    return False
                if admitted.granted:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SessionBusy()
                if admitted.previous not in asked:
                    asked.add(admitted.previous)
                    await self.store.ask_release(run_id, admitted.previous)
                # Woken by the release; polled in case a notification is missed.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(waiter.wait(), min(left, admitted.left_s, 0.5) + 0.01)
            finally:
                self.runs.hub.drop(run_id, waiter)
        held = self.sessions.get(session_id)
        if admitted.moved:
            self._taken_from[session_id] = admitted.previous
            stale = self.sessions.pop(session_id, None)
            if stale is not None:  # another worker served the session since this one did
                stale.released = True
                self._later(self._release_after_calls(stale))
        elif held is not None and not held.released:
            held.checked_until = sent + self._check_every_s
        if self.store.leases:
            self._renewing()
        return True

    @property
    def lease_s(self) -> float:
        return self.runs.settings.mcp_session_lease_s

    @property
    def _touch_every_s(self) -> float:
        return min(60.0, self.idle_s / 10)

    @property
    def _check_every_s(self) -> float:
        """How long a held session is served without reading its run: the sweep's idle clock
        is kept that coarsely, and half of the lease is left when it is renewed."""
        if self.store.leases:
            return min(self._touch_every_s, self.lease_s / 2)
        return self._touch_every_s  # one process serves the store: nobody takes it away

    def _later(self, job: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(job)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- opening and resuming -----------------------------------------------------------

    async def open(self, session_id: str, caller: Caller) -> McpSession:
        """The session's state: the one this worker holds, or rebuilt from the journal.

        The request asking was admitted here (`admit`): the session is not let go of before
        it is over. A call that found its state let go of meanwhile (its request ended
        before the call started) takes the lease again first."""
        parsed = parse_session_id(session_id)
        if parsed is None:
            raise LookupError(session_id)
        run_id = parsed[0]
        async with self._opening.setdefault(run_id, asyncio.Lock()):
            while True:
                existing = self.sessions.get(session_id)
                if existing is not None and not existing.released:
                    return existing
                letting_go = self.holds.letting_go(run_id)
                if letting_go is not None and self.holds.releasing(run_id):
                    await letting_go.wait()  # a call whose request is over: held again after
                    continue
                sent = time.monotonic()
                agent_id, key_id = caller.agent.id, caller.principal.key_id
                self.holds.enter(run_id)
                try:
                    if not await self.acquire(
                        None, session_id, run_id, agent_id=agent_id, key_id=key_id
                    ):
                        raise LookupError(session_id)  # ended meanwhile
                    state = await self.resume(session_id, caller)
                finally:
                    self.leave(run_id)
                state.checked_until = sent + self._check_every_s
                self.sessions[session_id] = state
                return state

    async def start(self, caller: Caller, *, elicitation: bool) -> McpSession:
        """Create the session's run (counted against the key's run rate and open sessions)
        and journal `run_started`; `QuiverError`s (429) come before any MCP exchange. The
        state is held here under its session id at once (`drop` it if no session comes of it)."""
        agent = caller.agent
        run_id = uuid.uuid4()
        self.runs.liveness.claim(run_id)
        try:
            conversation_id = await self.store.create_run(run_id, caller)
            toolset = await assemble_for_mcp(agent, self.runs)
        except BaseException:
            self.runs.liveness.unclaim(run_id)
            raise
        state = self._state(session_id_for(run_id, elicitation=elicitation), caller, toolset)
        await state.journal.write(
            RunStarted(
                run_id=str(run_id),
                conversation_id=str(conversation_id),
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
        the tools `request_tools` loaded, the number of calls, the next event number. A call
        the previous worker left in flight, if that worker is dead, is closed as failed."""
        parsed = parse_session_id(session_id)
        if parsed is None:
            raise LookupError(session_id)
        run_id = parsed[0]
        self.runs.liveness.claim(run_id)
        try:
            found = await self.store.summary(run_id)
            toolset = await assemble_for_mcp(caller.agent, self.runs)
            previous = self._taken_from.pop(session_id, None)
            if found.open_calls and previous not in (None, self.runs.worker_id):
                assert previous is not None
                if await self.store.worker_alive(previous):
                    found.open_calls = []  # still running there: its result is its own
        except BaseException:
            self.runs.liveness.unclaim(run_id)
            raise
        for names in found.loaded:
            toolset.activate(names)
        state = self._state(session_id, caller, toolset, calls=found.calls)
        state.journal.seq = found.last_seq
        for call_id, name in found.open_calls:
            await state.journal.write(lost_result(call_id, name))
            logger.warning("MCP session %s: call %s was lost with its worker", run_id, call_id)
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
        """One `tools/call` (see `calls.run_call`); if this worker let go of the session
        while the call waited for the one before, it is held again first."""
        while True:
            try:
                return await run_call(
                    state, name, arguments, gate=gate, audit_sink=self._audit_sink
                )
            except SessionReleased:
                caller = Caller(agent=state.agent, principal=state.principal)
                state = await self.open(state.session_id, caller)

    def _audit_sink(self, row: AuditRow) -> None:
        sink = self.runs.backends.tool_audit
        if sink is not None:
            sink.record(row)

    # --- ending --------------------------------------------------------------------------

    async def close(self, session_id: str) -> None:
        """The client ended the session (DELETE): its run finishes, whoever held it."""
        state = self.sessions.pop(session_id, None)
        parsed = parse_session_id(session_id)
        if parsed is not None:
            self._opening.pop(parsed[0], None)
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
        self._taken_from.pop(session_id, None)
        parsed = parse_session_id(session_id)
        if parsed is not None:
            self._opening.pop(parsed[0], None)
        try:
            if parsed is not None and not self.handing_over:
                worker = await self.store.serving_worker(parsed[0])
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
        seen = await self.store.last_activity(run)
        if (utcnow() - seen).total_seconds() >= self.idle_s:
            await self._finish(run.id)

    async def _finish(self, run_id: uuid.UUID) -> None:
        try:
            await self.store.finish(run_id)
        except Exception:
            logger.exception("could not finish the run %s of an MCP session", run_id)

    # --- leases ------------------------------------------------------------------------

    def _on_release(self, run_id: uuid.UUID, holder: uuid.UUID) -> None:
        """Another worker asks this one for the session of this run (`RunHub.on_release`):
        requests that come now wait (`admit`), those admitted before are served, then the
        lease goes (`_let_go`)."""
        if holder == self.runs.worker_id and self.holds.ask(run_id):
            self._later(self._let_go(run_id))

    async def _let_go(self, run_id: uuid.UUID) -> None:
        """Release the session once the requests admitted here are over and its calls in
        flight are done; no request is admitted here meanwhile (`admit` waits)."""
        held: list[McpSession] = []
        try:
            await self.holds.until_idle(run_id)
            held = [s for s in self.sessions.values() if s.run_id == run_id]
            for state in held:
                state.released = True
                async with state.lock:  # a call whose request ended goes on: it ends first
                    if self.sessions.get(state.session_id) is state:
                        del self.sessions[state.session_id]
            await self.store.release(run_id)
        except Exception:
            logger.exception("could not release the MCP session of run %s", run_id)
        finally:
            self.holds.released(run_id)
        for state in held:
            await self._release(state)

    def _renewing(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(
                self._renew_forever(), name="mcp-session-leases"
            )

    async def _renew_forever(self) -> None:
        """Keep the leases of sessions with a call in flight here: no other worker takes a
        session in the middle of a call (a quiet session's lease runs out by itself)."""
        while True:
            await asyncio.sleep(self.lease_s / 4)
            # Asked to let go or not: a call in flight keeps its session until it is done.
            busy = {s.run_id for s in self.sessions.values() if s.lock.locked()}
            busy.update(self.holds.serving)
            if busy:
                try:
                    await self.store.renew(list(busy))
                except Exception:
                    logger.exception("could not renew the leases of MCP sessions")

    async def _release_after_calls(self, state: McpSession) -> None:
        async with state.lock:
            await self._release(state)

    async def _release(self, state: McpSession) -> None:
        """Let go of what this worker held for the session (the run goes on, or is over)."""
        self.runs.journal.release(state.run_id)
        self.runs.liveness.unclaim(state.run_id)
        with contextlib.suppress(Exception):
            await state.toolset.aclose()

    async def aclose(self) -> None:
        """Shutdown: the sessions stay open for other workers (or this one after a restart)."""
        self.handing_over = True
        self.runs.liveness.resumable.pop(RUN_KIND, None)
        if self._renewer is not None:
            self._renewer.cancel()
        for session_id in list(self.sessions):
            state = self.sessions.pop(session_id)
            state.released = True
            async with state.lock:
                await self._release(state)
        try:  # another worker takes them at once, not once their leases run out
            await self.store.release_all()
        except Exception:
            logger.exception("could not release this worker's MCP sessions")
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task
