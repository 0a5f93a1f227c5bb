from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, utcnow


class RunStart(Base):
    """One run started by a key: the rate limit counts these rows (shared by every worker).

    Kept apart from `runs` so deleting a conversation does not give its runs back to the quota.
    Rows older than the window are pruned as new runs start.
    """

    __tablename__ = "run_starts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    api_key_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
