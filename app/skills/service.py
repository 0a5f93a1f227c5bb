from __future__ import annotations

import json
import re
import uuid
from typing import Any

import yaml
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Conflict, Invalid, NotFound
from app.kit.crud import CrudService
from app.skills.folder import Folder, FolderFile
from app.skills.models import Skill, SkillFile
from app.skills.repository import SkillFileRepository, SkillRepository
from app.skills.schemas import SkillCreate, SkillUpdate

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


def parse_skill_md(document: str, *, name: str | None = None) -> SkillCreate:
    """SKILL.md → SkillCreate; a precise 422 for every way the document can be wrong.

    `name` (already a valid slug) replaces the front matter's `name`, which may then be
    absent. Keys other than `name` and `description` are kept in `front_matter`.
    """
    match = _FRONT_MATTER.match(document.lstrip("\ufeff"))
    if match is None:
        raise Invalid("document: SKILL.md must start with YAML front matter between '---' lines")
    try:
        meta: Any = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise Invalid(f"document: front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise Invalid("document: front matter must be a mapping with 'name' and 'description'")
    for key in ("name", "description") if name is None else ("description",):
        if not isinstance(meta.get(key), str) or not meta[key].strip():
            raise Invalid(f"document: front matter needs a non-empty string {key!r}")
    extra = {str(k): v for k, v in meta.items() if k not in ("name", "description")}
    try:
        return SkillCreate(
            name=name if name is not None else meta["name"].strip(),
            description=meta["description"].strip(),
            content=match.group(2).strip(),
            # YAML dates and the like become strings: the keys are stored as JSON
            front_matter=json.loads(json.dumps(extra, default=str)),
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "front matter"
        if field == "content":
            raise Invalid(
                "document: the body after the front matter is empty; a skill needs instructions"
            ) from exc
        raise Invalid(f"document: {field}: {err['msg']}") from exc


class SkillService(CrudService[Skill]):
    repository = SkillRepository
    label = "skill"

    async def create(self, session: AsyncSession, data: SkillCreate) -> Skill:
        await self.ensure_name_free(session, data.name)
        return await self.save(session, Skill(**data.model_dump()))

    async def update(self, session: AsyncSession, id: uuid.UUID, data: SkillUpdate) -> Skill:
        skill = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        self.apply(skill, data)
        return await self.save(session, skill)

    async def import_document(
        self, session: AsyncSession, document: str, *, name: str | None = None
    ) -> Skill:
        return await self.create(session, parse_skill_md(document, name=name))

    async def import_folder(
        self, session: AsyncSession, folder: Folder, *, name: str | None, replace: bool
    ) -> tuple[Skill, bool]:
        """Create the skill (and its files), or with `replace` update the one of that name:
        (skill, created). Files given replace the stored ones; none given keeps them."""
        data = parse_skill_md(folder.document, name=name)
        existing = await self.repo(session).get_by(name=data.name)
        if existing is not None and not replace:
            raise Conflict(
                f"a skill named {data.name!r} already exists; send replace: true to update it"
            )
        skill = existing or Skill(name=data.name)
        skill.description = data.description
        skill.content = data.content
        skill.front_matter = data.front_matter
        if folder.files is not None:
            skill.file_index = [f.info() for f in folder.files]
        elif existing is None:
            skill.file_index = []
        skill = await self.save(session, skill)
        if folder.files is not None:
            await SkillFileRepository(session).replace(
                skill.id, [_row(skill.id, f) for f in folder.files]
            )
        return skill, existing is None

    async def read_file(self, session: AsyncSession, id: uuid.UUID, path: str) -> SkillFile:
        skill = await self.get(session, id)
        found = await SkillFileRepository(session).read(skill.id, path)
        if found is None:
            known = ", ".join(f["path"] for f in skill.file_index or []) or "none"
            raise NotFound(f"skill {skill.name!r} has no file {path!r} (files: {known})")
        return found


def _row(skill_id: uuid.UUID, file: FolderFile) -> SkillFile:
    return SkillFile(
        skill_id=skill_id,
        path=file.path,
        size=file.size,
        media_type=file.media_type,
        text=file.text,
        data=file.data,
    )


skill_service = SkillService()
