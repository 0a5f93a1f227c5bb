"""SQL of tenancy: the ownership filter for lists, and run starts for the rate limit."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.models import ApiKey
from app.tenancy.models import RunStart
from app.tenancy.principal import Principal


def visible_to(model: Any, principal: Principal) -> ColumnElement[bool]:
    """The rows of `model` (with `api_key_id` and `user`) the principal sees; mirrors
    `Principal.sees` so a list shows exactly what a GET by id answers."""
    if principal.admin:
        return true()
    user_ok = model.user.is_(None)
    if principal.user is not None:
        user_ok = or_(user_ok, model.user == principal.user)
    result: ColumnElement[bool] = (model.api_key_id == principal.key_id) & user_ok
    return result


class RunStartRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def lock_key(self, key_id: uuid.UUID) -> None:
        """Serialise run starts of one key across workers (row lock; SQLite has one writer)."""
        await self.session.execute(select(ApiKey.id).where(ApiKey.id == key_id).with_for_update())

    async def prune(self, key_id: uuid.UUID, before: datetime) -> None:
        await self.session.execute(
            delete(RunStart).where(RunStart.api_key_id == key_id, RunStart.created_at < before)
        )

    async def since(self, key_id: uuid.UUID, since: datetime) -> tuple[int, datetime | None]:
        """How many runs the key started since `since`, and the oldest of them."""
        stmt = select(func.count(), func.min(RunStart.created_at)).where(
            RunStart.api_key_id == key_id, RunStart.created_at >= since
        )
        count, oldest = (await self.session.execute(stmt)).one()
        return int(count or 0), oldest

    async def add(self, key_id: uuid.UUID, at: datetime) -> None:
        self.session.add(RunStart(api_key_id=key_id, created_at=at))
        await self.session.flush()
