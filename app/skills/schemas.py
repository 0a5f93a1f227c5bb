from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from app.kit.schemas import LongText, ReadSchema, Schema, ShortText, Slug

ScriptType = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_+-]{1,32}$")]


class SkillCreate(Schema):
    name: Slug
    description: ShortText = ""
    content: LongText = ""
    script: LongText | None = None
    script_type: ScriptType | None = None


class SkillUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None
    content: LongText | None = None
    script: LongText | None = None
    script_type: ScriptType | None = None


class SkillRead(ReadSchema):
    name: str
    description: str
    content: str
    script: str | None
    script_type: str | None


class SkillImport(Schema):
    document: Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
    """A SKILL.md document: YAML front matter (`name`, `description`), then the body."""
