from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import delete, select

from app.kit.repository import RepositoryBase
from app.skills.models import Skill, SkillFile


class SkillRepository(RepositoryBase[Skill]):
    model = Skill


class SkillFileRepository(RepositoryBase[SkillFile]):
    model = SkillFile

    async def replace(self, skill_id: uuid.UUID, files: Sequence[SkillFile]) -> None:
        """The skill's folder becomes exactly `files`."""
        await self.session.execute(delete(SkillFile).where(SkillFile.skill_id == skill_id))
        self.session.add_all(files)
        await self.session.flush()

    async def read(self, skill_id: uuid.UUID, path: str) -> SkillFile | None:
        stmt = select(SkillFile).where(SkillFile.skill_id == skill_id, SkillFile.path == path)
        return (await self.session.execute(stmt)).scalar_one_or_none()
