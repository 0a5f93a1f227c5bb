"""SQL of the console's sessions."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.models import ApiKey
from app.ui.models import ConsoleSession


class ConsoleSessionRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, row: ConsoleSession) -> None:
        self.session.add(row)
        await self.session.flush()

    async def live_with_key(
        self, id_hash: str, now: datetime
    ) -> tuple[ConsoleSession, ApiKey] | None:
        """The unexpired session and its key, when the key is not revoked."""
        stmt = (
            select(ConsoleSession, ApiKey)
            .join(ApiKey, ApiKey.id == ConsoleSession.api_key_id)
            .where(
                ConsoleSession.id_hash == id_hash,
                ConsoleSession.expires_at > now,
                ApiKey.revoked_at.is_(None),
            )
        )
        row = (await self.session.execute(stmt)).first()
        return None if row is None else (row[0], row[1])

    async def remove(self, id_hash: str) -> None:
        await self.session.execute(delete(ConsoleSession).where(ConsoleSession.id_hash == id_hash))

    async def prune(self, now: datetime, api_key_id: uuid.UUID) -> None:
        await self.session.execute(
            delete(ConsoleSession).where(
                ConsoleSession.api_key_id == api_key_id, ConsoleSession.expires_at <= now
            )
        )
