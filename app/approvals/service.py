"""Deciding and listing approvals (admin, or the key that owns the run)."""

from __future__ import annotations

import uuid

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.approvals.repository import ApprovalRepository, aware
from app.approvals.schemas import ApprovalDecide, ApprovalRead
from app.chat.hub import CHANNEL, RunHub
from app.chat.models import Run
from app.chat.repository import RunRepository
from app.db.base import utcnow
from app.errors import Conflict, NotFound
from app.kit.pagination import PageParams
from app.kit.schemas import Page
from app.tenancy.principal import Principal

_MAX_CHAIN = 8
"""More than the delegation depth: a bound on the walk up the parents."""


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
    runs = RunRepository(session)
    run = principal.owned(await runs.get(run_id), "run", run_id)
    repo = ApprovalRepository(session)
    approval = await repo.get(approval_id)
    if approval is None:
        raise NotFound(f"approval {str(approval_id)!r} not found")
    if approval.run_id != run.id:
        # A delegation's approval shows in its parent's stream: decided at either run id.
        child = await runs.get(approval.run_id)
        if child is None or run.id not in await _ancestors(runs, child):
            raise NotFound(f"approval {str(approval_id)!r} not found")
        run = child
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


async def _ancestors(runs: RunRepository, run: Run) -> set[uuid.UUID]:
    """The runs whose delegations (at most `MAX_DEPTH` deep) led to `run`."""
    found: set[uuid.UUID] = set()
    parent_id = run.parent_run_id
    while parent_id is not None and parent_id not in found and len(found) < _MAX_CHAIN:
        found.add(parent_id)
        parent = await runs.get(parent_id)
        parent_id = parent.parent_run_id if parent is not None else None
    return found


async def pending_of_run(session: AsyncSession, run_id: uuid.UUID) -> list[ApprovalRead]:
    """The run's pending approvals, then those of its running delegations (child runs)."""
    repo = ApprovalRepository(session)
    rows = await repo.pending_of_run(run_id)
    for child in await RunRepository(session).running_descendants(run_id, depth=_MAX_CHAIN):
        rows += await repo.pending_of_run(child)
    return [ApprovalRead.model_validate(row) for row in rows]


async def list_approvals(
    session: AsyncSession, principal: Principal, page: PageParams, *, status: str | None
) -> Page[ApprovalRead]:
    rows, total = await ApprovalRepository(session).page_for(
        principal, status=status, limit=page.limit, offset=page.offset
    )
    items = [ApprovalRead.model_validate(row) for row in rows]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)
