from __future__ import annotations

import uuid
from datetime import datetime
from typing import cast

from sqlalchemy import Table, select, update

from app.apikeys.models import ApiKey
from app.kit.repository import RepositoryBase


class ApiKeyRepository(RepositoryBase[ApiKey]):
    model = ApiKey

    async def get_active_by_hash(self, key_hash: str) -> ApiKey | None:
        stmt = select(ApiKey).where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def count_active_admin(self) -> int:
        rows = await self.session.execute(select(ApiKey).where(ApiKey.revoked_at.is_(None)))
        return sum(1 for key in rows.scalars() if "admin" in key.scopes)

    async def touch(self, key_id: uuid.UUID, moment: datetime) -> None:
        """Record a use (`last_used_at`) on the session's connection, outside the ORM's change
        tracking: it is not a change of the key that cached copies would need to see."""
        conn = await self.session.connection()
        table = cast(Table, ApiKey.__table__)
        await conn.execute(update(table).where(table.c.id == key_id).values(last_used_at=moment))
