from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, computed_field

from app.kit.schemas import LongText, OrEmpty, ReadSchema, Schema, ShortText, Slug, from_column

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


class SkillFileInfo(Schema):
    path: str
    """Relative to the skill's folder, e.g. `reference/mcp_best_practices.md`."""
    size: int
    media_type: str
    script: bool
    """Under `scripts/` or a script's extension: stored and listed, never run by Quiver."""
    text: bool
    """Readable as text (`read_skill` returns it); else bytes (fonts, archives)."""


Files = Annotated[list[SkillFileInfo], from_column("files", "file_index"), OrEmpty]


class SkillSummary(ReadSchema):
    """A skill in a list: no content (read it with `GET /skills/{id}`)."""

    name: str
    description: str
    script_type: str | None
    front_matter: dict[str, Any]
    file_index: Annotated[list[Any], Field(exclude=True)] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def file_count(self) -> int:
        return len(self.file_index or [])


class SkillRead(ReadSchema):
    name: str
    description: str
    content: str
    script: str | None
    script_type: str | None
    front_matter: dict[str, Any]
    files: Files


class SkillImport(Schema):
    document: Annotated[str, StringConstraints(min_length=1, max_length=200_000)]
    """A SKILL.md document: YAML front matter (`name`, `description`, optional `license`,
    `allowed-tools`, `metadata`, ...), then the body (the skill's content)."""
    name: Slug | None = None
    """Store the skill under this name instead of the front matter's `name`."""
    files: Annotated[dict[str, str], Field(max_length=200)] | None = None
    """The rest of the folder, `{"<relative path>": "<text>"}` (`reference/x.md`,
    `scripts/y.py`); omitted on a re-import, the stored files are kept."""
    replace: bool = False
    """Update the skill of that name (200) instead of answering 409."""
