"""MCP sessions as journal runs: one session = one run of kind `mcp_session`.

A session keeps the agent's assembled tool set (with what `request_tools` loaded) and a
`ToolPhase`, so every `tools/call` goes through the chat run's validation, guards,
executors, timeout, progress tracker, redaction and audit. Each call journals a
`tool_call` and a `tool_result` event; the end of the session journals `run_finished`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.approvals.gate import ApprovalGate
from app.chat.journal import JournalWriter
from app.chat.models import Conversation, Run
from app.chat.repository import RunRepository
from app.chat.runner import RunManager
from app.chat.steps import PhaseResult
from app.chat.tool_phase import ToolPhase
from app.events import RunEvent, RunFinished, RunStarted, ToolResultEvent, ToolsLoaded
from app.llm.types import ChatMessage, ToolCallRequest
from app.mcpserver.approval import NO_ELICITATION
from app.pipeline.assemble import assemble_toolset
from app.pipeline.toolset import AssembledToolset
from app.tenancy.limits import count_run_start
from app.tenancy.principal import Principal
from app.tools.base import CallContext

logger = logging.getLogger("quiver.mcp_server")
RUN_KIND = "mcp_session"


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
    started: float = field(default_factory=time.perf_counter)
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
    """The sessions this process serves (their runs are claimed from the lost-run sweep)."""

    def __init__(self, runs: RunManager) -> None:
        self.runs = runs
        self.sessions: dict[str, McpSession] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    def get(self, session_id: str) -> McpSession | None:
        return self.sessions.get(session_id)

    async def open(
        self, session_id: str, caller: Caller, *, toolset: AssembledToolset | None = None
    ) -> McpSession:
        """The session's state, creating its run on first use (`toolset`: already built)."""
        lock = self._opening.setdefault(session_id, asyncio.Lock())
        async with lock:
            existing = self.sessions.get(session_id)
            if existing is not None:
                return existing
            state = await self.start(caller, toolset)
            self.bind(session_id, state)
            return state

    def bind(self, session_id: str, state: McpSession) -> None:
        """The MCP SDK named the session: requests carrying its id reach this state."""
        state.session_id = session_id
        self.sessions[session_id] = state

    async def start(self, caller: Caller, toolset: AssembledToolset | None = None) -> McpSession:
        """Create the session's run (counted against the key's run rate) and journal
        `run_started`; `QuiverError`s (429) come before any MCP exchange."""
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
            if toolset is None:
                toolset = await assemble_for_mcp(agent, self.runs)
        except BaseException:
            self.runs.unclaim(run_id)
            raise
        settings = self.runs.settings
        ctx = CallContext(
            run_id=str(run_id),
            agent_id=str(agent.id),
            api_key_id=str(principal.key_id),
            user=principal.user,
        )
        state = McpSession(
            session_id="",
            run_id=run_id,
            agent=agent,
            principal=principal,
            toolset=toolset,
            phase=ToolPhase(
                toolset=toolset,
                ctx=ctx,
                timeout_s=settings.tool_timeout_s,
                step_iteration=toolset.config.step_iteration,
                audit=self.runs.backends.tool_audit,
                approval=toolset.config.approval,
                no_gate_error=NO_ELICITATION,
            ),
            journal=JournalWriter(run_id=run_id, batcher=self.runs.journal),
        )
        await state.journal.write(
            RunStarted(
                run_id=str(run_id),
                conversation_id=str(conversation.id),
                agent_id=str(agent.id),
                modes=toolset.modes.as_dict(),
                tools=[t.name for t in toolset.tools],
            )
        )
        logger.info("MCP session opened as run %s", run_id)
        return state

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
            stored = []
            async for event in state.phase.run([call], state.calls, messages):
                if isinstance(event, PhaseResult):
                    continue  # the observation is in `messages`
                events.append(event)
                stored.append(state.journal.submit(event)[2])  # queued in order, at once
            await asyncio.gather(*stored)  # the answer goes out once its events are stored
        ok = any(isinstance(e, ToolResultEvent) and e.ok for e in events)
        loaded = tuple(n for e in events if isinstance(e, ToolsLoaded) for n in e.names)
        text = (messages[-1].content or "") if messages else ""
        return CallOutcome(text=text, ok=ok, loaded=loaded)

    async def close(self, session_id: str) -> None:
        """End the session's run (`run_finished`), after DELETE, idle timeout or shutdown."""
        state = self.sessions.pop(session_id, None)
        self._opening.pop(session_id, None)
        if state is not None:
            await self.finish(state)

    async def finish(self, state: McpSession) -> None:
        """Journal `run_finished` and settle the run; release what the session held."""
        try:
            async with state.lock:
                event = RunFinished(
                    status="completed",
                    iterations=state.calls,
                    usage={},
                    elapsed_ms=round((time.perf_counter() - state.started) * 1000, 2),
                )

                async def settle(session: AsyncSession) -> None:
                    await RunRepository(session).finish(
                        state.run_id, status="completed", iterations=state.calls, usage={}
                    )

                await state.journal.write(event, also=settle)
        except Exception:
            logger.exception("could not finish the run %s of an MCP session", state.run_id)
        finally:
            self.runs.journal.release(state.run_id)
            self.runs.unclaim(state.run_id)
            with contextlib.suppress(Exception):
                await state.toolset.aclose()

    async def aclose(self) -> None:
        for session_id in list(self.sessions):
            await self.close(session_id)
