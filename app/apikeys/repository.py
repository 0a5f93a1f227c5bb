from __future__ import annotations

from sqlalchemy import select

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
