from __future__ import annotations

from typing import Any

from sqlalchemy import String, Text
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
