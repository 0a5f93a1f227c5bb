from __future__ import annotations

from sqlalchemy import select

from app.conventions.models import Convention
from app.kit.repository import RepositoryBase


class ConventionRepository(RepositoryBase[Convention]):
    model = Convention

    async def for_language(self, language: str | None) -> list[Convention]:
        stmt = select(Convention).order_by(Convention.created_at, Convention.id)
        if language:
            stmt = stmt.where(Convention.language == language)
        return list((await self.session.execute(stmt)).scalars().all())
