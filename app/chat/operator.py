"""Operator views of runs and conversations, scoped to what the caller owns."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.service import pending_of_run
from app.audit.tombstones import deleted_names
from app.chat.models import Run
from app.chat.operator_repository import (
    ConversationQueryRepository,
    RunQueryRepository,
    agent_names,
)
from app.chat.repository import RunRepository
from app.chat.schemas import AgentRef, ConversationSummary, RunRead
from app.errors import Conflict
from app.kit.pagination import PageParams
from app.kit.schemas import Page
from app.tenancy.principal import Principal


async def agent_refs(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, AgentRef]:
    """id → the agent as history shows it: its name, deleted or not."""
    wanted = set(ids)
    live = await agent_names(session, wanted)
    gone = await deleted_names(session, sorted(wanted - set(live)))
    return {
        id: AgentRef(id=id, name=live[id])
        if id in live
        else AgentRef(id=id, name=gone.get(id), deleted=True)
        for id in wanted
    }


def _run_read(run: Run, terminal: dict[str, Any] | None, agent: AgentRef) -> RunRead:
    terminal = terminal or {}
    reason = terminal.get("reason")
    if reason is None and isinstance(terminal.get("error"), dict):
        reason = terminal["error"].get("message")
    return RunRead(
        id=run.id,
        created_at=run.created_at,
        updated_at=run.updated_at,
        conversation_id=run.conversation_id,
        agent_id=run.agent_id,
        agent=agent,
        kind=run.kind,
        status=run.status,
        started_at=run.created_at,
        finished_at=run.finished_at,
        iterations=run.iterations,
        usage=run.usage,
        reason=reason,
        escalated=bool(terminal.get("escalated", False)),
        error=run.error,
        cancel_requested=run.cancel_requested,
        api_key_id=run.api_key_id,
        user=run.user,
        parent_run_id=run.parent_run_id,
    )


async def list_runs(
    session: AsyncSession,
    principal: Principal,
    page: PageParams,
    *,
    agent_id: uuid.UUID | None = None,
    conversation_id: uuid.UUID | None = None,
    parent_run_id: uuid.UUID | None = None,
    status: str | None = None,
) -> Page[RunRead]:
    repo = RunQueryRepository(session)
    runs, total = await repo.page(
        principal,
        agent_id=agent_id,
        conversation_id=conversation_id,
        parent_run_id=parent_run_id,
        status=status,
        limit=page.limit,
        offset=page.offset,
    )
    terminals = await repo.terminal_events([run.id for run in runs])
    agents = await agent_refs(session, {run.agent_id for run in runs})
    items = [_run_read(run, terminals.get(run.id), agents[run.agent_id]) for run in runs]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)


async def get_run(session: AsyncSession, principal: Principal, run_id: uuid.UUID) -> RunRead:
    repo = RunQueryRepository(session)
    run = principal.owned(await repo.get(run_id), "run", run_id)
    agents = await agent_refs(session, [run.agent_id])
    read = _run_read(run, (await repo.terminal_events([run.id])).get(run.id), agents[run.agent_id])
    if run.status == "running":
        read.pending_approvals = await pending_of_run(session, run.id)
    return read


async def list_conversations(
    session: AsyncSession,
    principal: Principal,
    page: PageParams,
    *,
    agent_id: uuid.UUID | None = None,
) -> Page[ConversationSummary]:
    rows, total = await ConversationQueryRepository(session).page(
        principal, agent_id=agent_id, limit=page.limit, offset=page.offset
    )
    agents = await agent_refs(session, {row.agent_id for row in rows})
    items = [
        ConversationSummary.model_validate(
            {**{f: getattr(row, f) for f in _SUMMARY_FIELDS}, "agent": agents[row.agent_id]}
        )
        for row in rows
    ]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)


_SUMMARY_FIELDS = tuple(f for f in ConversationSummary.model_fields if f != "agent")


async def delete_conversation(
    session: AsyncSession, principal: Principal, conversation_id: uuid.UUID
) -> None:
    """Delete a conversation with its messages, runs and journal; 409 while a run is going."""
    repo = ConversationQueryRepository(session)
    principal.owned(await repo.get(conversation_id), "conversation", conversation_id)
    if await RunRepository(session).running_in_conversation(conversation_id) is not None:
        raise Conflict(
            "a run is in progress in this conversation; cancel it "
            "(POST /api/v1/runs/{run_id}/cancel) and delete the conversation when it has ended"
        )
    await repo.remove(conversation_id)
