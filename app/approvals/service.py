"""Deciding and listing approvals (admin, or the key that owns the run)."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.repository import ApprovalRepository, aware
from app.approvals.schemas import ApprovalDecide, ApprovalRead
from app.chat.hub import CHANNEL, RunHub
from app.chat.repository import RunRepository
from app.db.base import utcnow
from app.errors import Conflict, NotFound
from app.kit.pagination import PageParams
from app.kit.schemas import Page
from app.tenancy.principal import Principal


def decider(principal: Principal) -> str:
    """Who decided, as `approval_resolved.by` shows it: the key id (and the end user)."""
    key = f"key:{principal.key_id}"
    return f"{key} user:{principal.user}" if principal.user else key


async def decide(
    session: AsyncSession,
    hub: RunHub,
    principal: Principal,
    run_id: uuid.UUID,
    approval_id: uuid.UUID,
    body: ApprovalDecide,
    *,
    notify: bool,
) -> ApprovalRead:
    run = principal.owned(await RunRepository(session).get(run_id), "run", run_id)
    repo = ApprovalRepository(session)
    approval = await repo.get(approval_id)
    if approval is None or approval.run_id != run.id:
        raise NotFound(f"approval {str(approval_id)!r} not found")
    if approval.status != "pending":
        raise Conflict(f"approval {str(approval_id)!r} is already {approval.status}")
    if aware(approval.expires_at) <= utcnow():
        raise Conflict(f"approval {str(approval_id)!r} has expired")
    if run.status != "running":
        raise Conflict(f"run {str(run_id)!r} is no longer running ({run.status})")
    status = "approved" if body.decision == "approve" else "denied"
    if not await repo.settle(
        approval_id, status, by=decider(principal), reason=body.reason, unexpired=True
    ):
        raise Conflict(f"approval {str(approval_id)!r} was decided or expired meanwhile")
    if notify:  # wakes the waiting call on whichever worker runs it
        await session.execute(
            text("SELECT pg_notify(:c, :p)"), {"c": CHANNEL, "p": str(approval_id)}
        )
    await session.commit()
    hub.wake(approval_id)
    await session.refresh(approval)
    return ApprovalRead.model_validate(approval)


async def pending_of_run(session: AsyncSession, run_id: uuid.UUID) -> list[ApprovalRead]:
    rows = await ApprovalRepository(session).pending_of_run(run_id)
    return [ApprovalRead.model_validate(row) for row in rows]


async def list_approvals(
    session: AsyncSession, principal: Principal, page: PageParams, *, status: str | None
) -> Page[ApprovalRead]:
    rows, total = await ApprovalRepository(session).page_for(
        principal, status=status, limit=page.limit, offset=page.offset
    )
    items = [ApprovalRead.model_validate(row) for row in rows]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)
