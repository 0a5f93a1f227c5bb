from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from app.kit.schemas import LongText, ReadSchema, Schema

Language = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_+#.-]{1,64}$")]
Directory = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class ConventionCreate(Schema):
    language: Language
    directory: Directory | None = None
    """Null = language level; otherwise a project-relative directory such as `src/api`."""
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)]


class ConventionUpdate(Schema):
    language: Language | None = None
    directory: Directory | None = None
    content: Annotated[str, StringConstraints(min_length=1, max_length=20_000)] | None = None


class ConventionRead(ReadSchema):
    language: str
    directory: str | None
    content: LongText
