"""SQL of approvals: create, decide exactly once, expire, list what a principal sees."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import select, update

from app.approvals.models import Approval
from app.chat.models import Run
from app.db.base import utcnow
from app.kit.repository import RepositoryBase
from app.tenancy.principal import Principal
from app.tenancy.repository import visible_to


def aware(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class ApprovalRepository(RepositoryBase[Approval]):
    model = Approval

    async def settle(
        self,
        approval_id: uuid.UUID,
        status: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        unexpired: bool = False,
    ) -> bool:
        """Move a pending approval to `status`; False when it was no longer pending (someone
        else decided, or it expired): a decision lands exactly once."""
        now = utcnow()
        stmt = (
            update(Approval)
            .where(Approval.id == approval_id, Approval.status == "pending")
            .values(
                status=status,
                decided_at=now,
                decided_by=by,
                decision_reason=reason,
                updated_at=now,
            )
        )
        if unexpired:
            stmt = stmt.where(Approval.expires_at > now)
        result = await self.session.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    async def close_pending(self, run_id: uuid.UUID, status: str) -> None:
        """A run that ended (e.g. lost with its worker) leaves nothing to decide."""
        now = utcnow()
        await self.session.execute(
            update(Approval)
            .where(Approval.run_id == run_id, Approval.status == "pending")
            .values(status=status, decided_at=now, updated_at=now)
        )

    async def pending_of_run(self, run_id: uuid.UUID) -> list[Approval]:
        stmt = (
            select(Approval)
            .where(Approval.run_id == run_id, Approval.status == "pending")
            .order_by(Approval.created_at)
        )
        return list((await self.session.execute(stmt)).scalars())

    async def page_for(
        self, principal: Principal, *, status: str | None, limit: int, offset: int
    ) -> tuple[list[Approval], int]:
        """What the principal may decide, newest first; pending ones only of running runs
        (a run closed as lost can no longer execute anything)."""
        stmt = (
            select(Approval)
            .where(visible_to(Approval, principal))
            .order_by(Approval.created_at.desc())
        )
        if status is not None:
            stmt = stmt.where(Approval.status == status)
            if status == "pending":
                running = select(Run.id).where(Run.status == "running")
                stmt = stmt.where(Approval.run_id.in_(running))
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)
