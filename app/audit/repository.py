from __future__ import annotations

import uuid

from sqlalchemy import select

from app.audit.models import ToolCall
from app.kit.repository import RepositoryBase
from app.tenancy.principal import Principal
from app.tenancy.repository import visible_to


class ToolCallRepository(RepositoryBase[ToolCall]):
    model = ToolCall

    async def page(
        self,
        principal: Principal,
        *,
        run_id: uuid.UUID | None,
        kind: str | None,
        name: str | None,
        ok: bool | None,
        limit: int,
        offset: int,
    ) -> tuple[list[ToolCall], int]:
        stmt = (
            select(ToolCall)
            .where(visible_to(ToolCall, principal))
            .order_by(ToolCall.created_at.desc())
        )
        if run_id is not None:
            stmt = stmt.where(ToolCall.run_id == run_id)
        if kind is not None:
            stmt = stmt.where(ToolCall.kind == kind)
        if name is not None:
            stmt = stmt.where(ToolCall.name == name)
        if ok is not None:
            stmt = stmt.where(ToolCall.ok.is_(ok))
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)
