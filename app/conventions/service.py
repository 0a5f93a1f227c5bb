from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.conventions.models import Convention
from app.conventions.repository import ConventionRepository
from app.conventions.schemas import ConventionCreate, ConventionUpdate
from app.kit.crud import CrudService


def normalize_directory(directory: str | None) -> str | None:
    """`./src/api/` and `src\\api` are both stored as `src/api`; `.`/`/` mean project root ("")."""
    if directory is None:
        return None
    parts = [p for p in directory.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


class ConventionService(CrudService[Convention]):
    repository = ConventionRepository
    label = "convention"
    unique_name = False

    async def create(self, session: AsyncSession, data: ConventionCreate) -> Convention:
        row = Convention(**data.model_dump())
        row.directory = normalize_directory(row.directory)
        return await self.save(session, row)

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: ConventionUpdate
    ) -> Convention:
        row = await self.get(session, id)
        if "directory" in self.apply(row, data):
            row.directory = normalize_directory(row.directory)
        return await self.save(session, row)


convention_service = ConventionService()
