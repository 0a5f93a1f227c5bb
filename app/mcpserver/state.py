"""What one MCP endpoint session is: its id, its caller, its tools, its journal.

The session id names the session's run (its hex id, plus `e` when the client declared
elicitation at `initialize`), so any worker can find the run from a request alone.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.agents.models import Agent
from app.audit.record import AuditRow
from app.chat.journal import JournalWriter
from app.chat.runner import RunManager
from app.chat.tool_phase import ToolPhase
from app.pipeline.assemble import assemble_toolset
from app.pipeline.toolset import AssembledToolset
from app.tenancy.principal import Principal

RUN_KIND = "mcp_session"
_ELICITS = "e"
"""Session-id suffix: the client declared elicitation (it asks its person for approvals)."""


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
    stored: asyncio.Future[Any]
    """Done once the call's events are committed (failed if they could not be): the answer
    must not reach the client before (`calls.run_call`)."""
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
        self.rows: list[AuditRow] = []

    def record(self, row: AuditRow) -> None:
        self.rows.append(row)

    def take(self) -> list[AuditRow]:
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
    checked_until: float = 0.0
    """Until when this worker serves the session's requests without reading its run
    (monotonic): within its lease (Postgres) and the sweep's idle clock. See `McpSessions`."""
    released: bool = False
    """This worker let go of the session (another worker asked for it): calls waiting here
    go through admission again."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    """Events of one session are journaled in call order."""

    def belongs_to(self, agent_id: uuid.UUID, key_id: uuid.UUID) -> bool:
        """A session is used with the agent and the key that opened it (else: not found)."""
        return self.agent.id == agent_id and self.principal.key_id == key_id


async def assemble_for_mcp(agent: Agent, runs: RunManager) -> AssembledToolset:
    """What `GET /agents/{id}/toolset` shows with no message: no runtime (LLM) selection."""
    return await assemble_toolset(agent, runs.settings, runs.backends, "")


def aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
