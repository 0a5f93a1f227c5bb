from __future__ import annotations

from app.kit.repository import RepositoryBase
from app.skills.models import Skill


class SkillRepository(RepositoryBase[Skill]):
    model = Skill
