"""Operator routes for runs and conversations: admin sees all, a chat key what it owns."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, status

from app.chat.operator import delete_conversation, get_run, list_conversations, list_runs
from app.chat.schemas import ConversationSummary, RunRead
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES
from app.kit.pagination import PageDep
from app.kit.schemas import Page
from app.tenancy.principal import PrincipalDep

router = APIRouter(tags=["runs"])
RunStatus = Annotated[
    str | None,
    Query(
        pattern=r"^(running|completed|max_iterations|stopped|cancelled|failed)$",
        description="running | completed | max_iterations | stopped | cancelled | failed",
    ),
]
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: ERROR_RESPONSES[404]}


@router.get("/runs", response_model=Page[RunRead])
async def runs(
    session: SessionDep,
    principal: PrincipalDep,
    page: PageDep,
    agent_id: uuid.UUID | None = None,
    conversation_id: uuid.UUID | None = None,
    parent_run_id: uuid.UUID | None = None,
    status: RunStatus = None,
) -> Page[RunRead]:
    """Runs, newest first (paginated), filtered by agent, conversation, parent run (the
    `call_agent` delegations a run started) and status."""
    return await list_runs(
        session,
        principal,
        page,
        agent_id=agent_id,
        conversation_id=conversation_id,
        parent_run_id=parent_run_id,
        status=status,
    )


@router.get("/runs/{run_id}", response_model=RunRead, responses=NOT_FOUND)
async def run(run_id: uuid.UUID, session: SessionDep, principal: PrincipalDep) -> RunRead:
    """One run: status, agent, conversation, times, iterations, usage, reason, escalated."""
    return await get_run(session, principal, run_id)


@router.get("/conversations", response_model=Page[ConversationSummary])
async def conversations(
    session: SessionDep,
    principal: PrincipalDep,
    page: PageDep,
    agent_id: uuid.UUID | None = None,
) -> Page[ConversationSummary]:
    """Conversations, newest first (paginated), optionally of one agent."""
    return await list_conversations(session, principal, page, agent_id=agent_id)


@router.delete(
    "/conversations/{conversation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={**NOT_FOUND, 409: ERROR_RESPONSES[409]},
)
async def remove_conversation(
    conversation_id: uuid.UUID, session: SessionDep, principal: PrincipalDep
) -> None:
    """Delete a conversation with its messages, runs and their journals (409 while running)."""
    await delete_conversation(session, principal, conversation_id)
