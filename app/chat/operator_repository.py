"""SQL of the operator routes: filtered, owner-scoped lists of runs and conversations."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select

from app.chat.models import Conversation, Run, RunEventRecord
from app.events import TERMINAL_KINDS
from app.kit.repository import RepositoryBase
from app.tenancy.principal import Principal
from app.tenancy.repository import visible_to


class RunQueryRepository(RepositoryBase[Run]):
    model = Run

    async def page(
        self,
        principal: Principal,
        *,
        agent_id: uuid.UUID | None,
        conversation_id: uuid.UUID | None,
        parent_run_id: uuid.UUID | None,
        status: str | None,
        limit: int,
        offset: int,
    ) -> tuple[list[Run], int]:
        stmt = select(Run).where(visible_to(Run, principal)).order_by(Run.created_at.desc())
        if agent_id is not None:
            stmt = stmt.where(Run.agent_id == agent_id)
        if conversation_id is not None:
            stmt = stmt.where(Run.conversation_id == conversation_id)
        if parent_run_id is not None:
            stmt = stmt.where(Run.parent_run_id == parent_run_id)
        if status is not None:
            stmt = stmt.where(Run.status == status)
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)

    async def terminal_events(self, run_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Any]:
        """run id → the data of its final journal event (`run_finished` / `run_failed`)."""
        if not run_ids:
            return {}
        stmt = select(RunEventRecord.run_id, RunEventRecord.data).where(
            RunEventRecord.run_id.in_(run_ids), RunEventRecord.kind.in_(TERMINAL_KINDS)
        )
        rows = (await self.session.execute(stmt)).all()
        return dict(rows)


class ConversationQueryRepository(RepositoryBase[Conversation]):
    model = Conversation

    async def page(
        self, principal: Principal, *, agent_id: uuid.UUID | None, limit: int, offset: int
    ) -> tuple[list[Conversation], int]:
        stmt = (
            select(Conversation)
            .where(visible_to(Conversation, principal))
            .order_by(Conversation.created_at.desc())
        )
        if agent_id is not None:
            stmt = stmt.where(Conversation.agent_id == agent_id)
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)

    async def remove(self, conversation_id: uuid.UUID) -> None:
        """Its messages, runs and their journals go with it (ON DELETE CASCADE)."""
        await self.session.execute(delete(Conversation).where(Conversation.id == conversation_id))
