"""SQL of the operator routes: filtered, owner-scoped lists of runs and conversations."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
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


async def agent_names(session: AsyncSession, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The names of the existing agents among `ids`."""
    wanted = set(ids)
    if not wanted:
        return {}
    stmt = select(Agent.id, Agent.name).where(Agent.id.in_(wanted))
    return {row.id: row.name for row in await session.execute(stmt)}


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

    async def remove_idle_since(self, cutoff: datetime) -> int:
        """Delete the conversations created before `cutoff` with no run since and none
        running (their messages, runs and journals go with them); how many."""
        active = (
            select(Run.id)
            .where(
                Run.conversation_id == Conversation.id,
                or_(Run.created_at >= cutoff, Run.status == "running"),
            )
            .exists()
        )
        stmt = delete(Conversation).where(Conversation.created_at < cutoff, ~active)
        result = await self.session.execute(stmt, execution_options={"synchronize_session": False})
        return int(getattr(result, "rowcount", 0) or 0)

    async def remove(self, conversation_id: uuid.UUID) -> None:
        """Its messages, runs and their journals go with it (ON DELETE CASCADE)."""
        await self.session.execute(delete(Conversation).where(Conversation.id == conversation_id))
