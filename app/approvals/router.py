"""Approval routes: decide one call of a run; list approvals across runs."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.approvals.schemas import ApprovalDecide, ApprovalRead
from app.approvals.service import decide, list_approvals
from app.chat.deps import RunHubDep
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES
from app.kit.pagination import PageDep
from app.kit.schemas import Page
from app.kit.state import SettingsDep
from app.tenancy.principal import PrincipalDep

router = APIRouter(tags=["approvals"])
ApprovalStatus = Annotated[
    str | None,
    Query(
        pattern=r"^(pending|approved|denied|expired|cancelled)$",
        description="pending | approved | denied | expired | cancelled",
    ),
]


@router.post(
    "/runs/{run_id}/approvals/{approval_id}",
    response_model=ApprovalRead,
    responses={404: ERROR_RESPONSES[404], 409: ERROR_RESPONSES[409]},
)
async def decide_approval(
    run_id: uuid.UUID,
    approval_id: uuid.UUID,
    body: ApprovalDecide,
    session: SessionDep,
    hub: RunHubDep,
    settings: SettingsDep,
    principal: PrincipalDep,
) -> ApprovalRead:
    """Approve or deny a call that waits (admin, or the key that owns the run).

    Approve runs the call (exactly once); deny gives the model `Denied by a person: <reason>`.
    404 for an unknown run or approval (or someone else's run); 409 when it was already
    decided, has expired, or its run is no longer running."""
    return await decide(
        session,
        hub,
        principal,
        run_id,
        approval_id,
        body,
        notify=not settings.is_sqlite,
    )


@router.get("/approvals", response_model=Page[ApprovalRead])
async def approvals(
    session: SessionDep, principal: PrincipalDep, page: PageDep, status: ApprovalStatus = None
) -> Page[ApprovalRead]:
    """Approvals newest first (admin all, a chat key those of its own runs);
    `status=pending` lists what waits for a decision now."""
    return await list_approvals(session, principal, page, status=status)
