"""What `read_skill(name, path)` and the MCP endpoint's resources read: one file of a skill's
folder, on demand (the agent's cached skills carry only the file index)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.skills.repository import SkillFileRepository


@dataclass(frozen=True, kw_only=True)
class SkillFileContent:
    path: str
    media_type: str
    size: int
    text: str | None
    data: bytes | None


class SkillFileBackend(Protocol):
    async def read_file(self, skill_id: uuid.UUID, path: str) -> SkillFileContent | None: ...


class SkillFiles:
    """Implements `SkillFileBackend` over the store."""

    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def read_file(self, skill_id: uuid.UUID, path: str) -> SkillFileContent | None:
        async with self._sessionmaker() as session:
            row = await SkillFileRepository(session).read(skill_id, path)
            if row is None:
                return None
            return SkillFileContent(
                path=row.path,
                media_type=row.media_type,
                size=row.size,
                text=row.text,
                data=row.data,
            )
