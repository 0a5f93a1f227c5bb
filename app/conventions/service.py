from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.conventions.models import Convention
from app.conventions.recall import normalize_directory
from app.conventions.repository import ConventionRepository
from app.conventions.schemas import ConventionCreate, ConventionUpdate
from app.kit.crud import CrudService


def _stored_directory(directory: str | None) -> str | None:
    """Null stays the language level; any path is stored normalised (`./src/api/` → `src/api`)."""
    return None if directory is None else normalize_directory(directory)


class ConventionService(CrudService[Convention]):
    repository = ConventionRepository
    label = "convention"
    unique_name = False

    async def create(self, session: AsyncSession, data: ConventionCreate) -> Convention:
        row = Convention(**data.model_dump())
        row.directory = _stored_directory(row.directory)
        return await self.save(session, row)

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: ConventionUpdate
    ) -> Convention:
        row = await self.get(session, id)
        if "directory" in self.apply(row, data):
            row.directory = _stored_directory(row.directory)
        return await self.save(session, row)


convention_service = ConventionService()
