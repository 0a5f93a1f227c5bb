from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from app.kit.schemas import LongText, ReadSchema, Schema, ShortText, Slug

ScriptType = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_+-]{1,32}$")]
Content = Annotated[str, StringConstraints(min_length=1, max_length=200_000, pattern=r"\S")]
"""A skill's instructions: what the model reads when it loads the skill, so never empty."""
FrontMatter = Annotated[dict[str, Any], Field(max_length=64)]


class SkillCreate(Schema):
    name: Slug
    description: ShortText = ""
    content: Content
    script: LongText | None = None
    script_type: ScriptType | None = None
    front_matter: FrontMatter = Field(default_factory=dict)
    """Other SKILL.md front-matter keys, kept as given (`license`, `allowed-tools`, `metadata`)."""


class SkillUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None
    content: Content | None = None
    script: LongText | None = None
    script_type: ScriptType | None = None
    front_matter: FrontMatter | None = None


class SkillRead(ReadSchema):
    name: str
    description: str
    content: str
    script: str | None
    script_type: str | None
    front_matter: dict[str, Any]


class SkillImport(Schema):
    document: Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
    """A SKILL.md document: YAML front matter (`name`, `description`, optional `license`,
    `allowed-tools`, `metadata`, ...), then the body (the skill's content)."""
    name: Slug | None = None
    """Store the skill under this name instead of the front matter's `name`."""
