from __future__ import annotations

from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin


class Convention(IdMixin, TimestampMixin, Base):
    __tablename__ = "conventions"

    language: Mapped[str] = mapped_column(String(64), index=True)
    directory: Mapped[str | None] = mapped_column(String(1024), default=None)
    """Null means the language level."""
    content: Mapped[str] = mapped_column(Text)
