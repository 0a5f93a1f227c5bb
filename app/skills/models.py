from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin


class Skill(IdMixin, TimestampMixin, Base):
    __tablename__ = "skills"

    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    content: Mapped[str] = mapped_column(Text, default="")
    script: Mapped[str | None] = mapped_column(Text, default=None)
    script_type: Mapped[str | None] = mapped_column(String(32), default=None)
    front_matter: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The other SKILL.md front-matter keys (`license`, `allowed-tools`, `metadata`, ...)."""
    file_index: Mapped[list[Any]] = mapped_column(default=list)
    """The rest of the skill's folder, without contents: `[{path, size, media_type, script,
    text}]` in path order (contents are `SkillFile` rows, read one at a time)."""


class SkillFile(IdMixin, Base):
    """One file of a skill's folder (`reference/x.md`, `scripts/y.py`), stored as imported.

    Text files keep their text; anything else (fonts, archives) its bytes. Scripts are
    stored and listed, never run."""

    __tablename__ = "skill_files"
    __table_args__ = (UniqueConstraint("skill_id", "path"),)

    skill_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("skills.id", ondelete="CASCADE"), index=True
    )
    path: Mapped[str] = mapped_column(String(512))
    size: Mapped[int] = mapped_column(Integer)
    media_type: Mapped[str] = mapped_column(String(128))
    text: Mapped[str | None] = mapped_column(Text, default=None)
    data: Mapped[bytes | None] = mapped_column(LargeBinary, default=None)
