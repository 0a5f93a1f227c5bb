"""Every SQL statement of the OAuth server: clients, codes (claimed once), tokens."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.apikeys.models import ApiKey
from app.oauth.models import OAuthClient, OAuthCode, OAuthToken


class OAuthRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, row: OAuthClient | OAuthCode | OAuthToken) -> None:
        self.session.add(row)
        await self.session.flush()

    async def client(self, client_id: str) -> OAuthClient | None:
        stmt = select(OAuthClient).where(OAuthClient.client_id == client_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def code(self, code_hash: str, client_row_id: uuid.UUID) -> OAuthCode | None:
        stmt = select(OAuthCode).where(
            OAuthCode.code_hash == code_hash, OAuthCode.client_row_id == client_row_id
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def prune_codes(self, before: datetime) -> None:
        """Codes that expired before `before` are of no use any more (kept a while so a late
        replay is still recognised as one)."""
        await self.session.execute(delete(OAuthCode).where(OAuthCode.expires_at < before))

    async def claim_code(self, code_id: uuid.UUID, now: datetime) -> bool:
        """Mark a code used; False when it was used already (a concurrent redemption waits
        for the first one's row lock and then finds it used)."""
        stmt = (
            update(OAuthCode)
            .where(OAuthCode.id == code_id, OAuthCode.used_at.is_(None))
            .values(used_at=now)
        )
        result: CursorResult[tuple[()]] = await self.session.execute(stmt)  # type: ignore[assignment]
        return result.rowcount == 1

    async def token_by_access(self, access_hash: str) -> OAuthToken | None:
        stmt = select(OAuthToken).where(OAuthToken.access_hash == access_hash)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def token_by_refresh(self, refresh_hash: str) -> OAuthToken | None:
        stmt = select(OAuthToken).where(OAuthToken.refresh_hash == refresh_hash)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def claim_refresh(self, token_id: uuid.UUID, now: datetime) -> bool:
        """Revoke a token row as its refresh token is spent; False when it was spent (or
        revoked) already."""
        stmt = (
            update(OAuthToken)
            .where(OAuthToken.id == token_id, OAuthToken.revoked_at.is_(None))
            .values(revoked_at=now, updated_at=now)
        )
        result: CursorResult[tuple[()]] = await self.session.execute(stmt)  # type: ignore[assignment]
        return result.rowcount == 1

    async def revoke_grant(self, grant_id: uuid.UUID, now: datetime) -> None:
        """Every token of one consent stops working."""
        stmt = (
            update(OAuthToken)
            .where(OAuthToken.grant_id == grant_id, OAuthToken.revoked_at.is_(None))
            .values(revoked_at=now, updated_at=now)
        )
        await self.session.execute(stmt)

    async def active_key(self, key_id: uuid.UUID) -> ApiKey | None:
        stmt = select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def agent_by_name(self, name: str) -> Agent | None:
        stmt = select(Agent).where(Agent.name == name)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def live_tokens(
        self, now: datetime, *, api_key_id: uuid.UUID | None, limit: int
    ) -> list[tuple[OAuthToken, OAuthClient, Agent, ApiKey]]:
        """Unrevoked tokens whose access or refresh token still works, newest first; all of
        them (`api_key_id` None) or those a person consented to with one key."""
        stmt = (
            select(OAuthToken, OAuthClient, Agent, ApiKey)
            .join(OAuthClient, OAuthClient.id == OAuthToken.client_row_id)
            .join(Agent, Agent.id == OAuthToken.agent_id)
            .join(ApiKey, ApiKey.id == OAuthToken.api_key_id)
            .where(
                OAuthToken.revoked_at.is_(None),
                (OAuthToken.access_expires_at > now) | (OAuthToken.refresh_expires_at > now),
            )
            .order_by(OAuthToken.created_at.desc(), OAuthToken.id)
            .limit(limit)
        )
        if api_key_id is not None:
            stmt = stmt.where(OAuthToken.api_key_id == api_key_id)
        rows = await self.session.execute(stmt)
        return [(t, c, a, k) for t, c, a, k in rows.all()]

    async def token(self, token_id: uuid.UUID) -> OAuthToken | None:
        return await self.session.get(OAuthToken, token_id)
