from __future__ import annotations

import hashlib
import secrets as pysecrets
import uuid
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.repository import AgentRepository
from app.apikeys.models import ApiKey
from app.apikeys.repository import ApiKeyRepository
from app.apikeys.schemas import ApiKeyCreate, ApiKeyUpdate
from app.db.base import utcnow
from app.db.locks import SEED_ADMIN, lock_session_transaction
from app.errors import Invalid
from app.kit.crud import CrudService

KEY_PREFIX = "qv_"
TOUCH_EVERY = timedelta(seconds=60)
"""How often a key's `last_used_at` is written (at most)."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """What lists show to tell keys apart: at most 8 characters and a fifth of the key, so a
    short operator-chosen QUIVER_ADMIN_TOKEN is not half revealed."""
    return key[: min(8, len(key) // 5)]


def generate_key() -> str:
    return KEY_PREFIX + pysecrets.token_urlsafe(32)


async def _agent_ids(session: AsyncSession, ids: list[uuid.UUID] | None) -> list[str] | None:
    """Stored as strings; every id must name an existing agent."""
    if ids is None:
        return None
    unique = list(dict.fromkeys(ids))
    found = {agent.id for agent in await AgentRepository(session).get_many(unique)}
    missing = [str(i) for i in unique if i not in found]
    if missing:
        raise Invalid(f"agent_ids: unknown agent(s) {', '.join(missing)}")
    return [str(i) for i in unique]


class ApiKeyService(CrudService[ApiKey]):
    repository = ApiKeyRepository
    label = "api key"
    unique_name = False

    async def create(self, session: AsyncSession, data: ApiKeyCreate) -> tuple[ApiKey, str]:
        agent_ids = await _agent_ids(session, data.agent_ids)
        key = generate_key()
        row = ApiKey(
            name=data.name,
            key_hash=hash_key(key),
            prefix=display_prefix(key),
            scopes=list(dict.fromkeys(data.scopes)),
            agent_ids=agent_ids,
            rate_limit_per_minute=data.rate_limit_per_minute,
        )
        return await self.save(session, row), key

    async def add_key(
        self, session: AsyncSession, key: str, *, name: str, scopes: list[str]
    ) -> ApiKey:
        row = ApiKey(name=name, key_hash=hash_key(key), prefix=display_prefix(key), scopes=scopes)
        return await self.save(session, row)

    async def update(self, session: AsyncSession, id: uuid.UUID, data: ApiKeyUpdate) -> ApiKey:
        row = await self.get(session, id)
        changed = self.apply(row, data, skip=frozenset({"agent_ids"}))
        if "agent_ids" in changed:
            row.agent_ids = await _agent_ids(session, data.agent_ids)
        return await self.save(session, row)

    async def revoke(self, session: AsyncSession, id: uuid.UUID) -> None:
        row = await self.get(session, id)
        if row.revoked_at is None:
            row.revoked_at = utcnow()
        await session.flush()

    async def authenticate(self, session: AsyncSession, key: str) -> ApiKey | None:
        row = await ApiKeyRepository(session).get_active_by_hash(hash_key(key))
        if row is not None:
            now = utcnow()
            last = row.last_used_at
            if last is None or now - last.replace(tzinfo=now.tzinfo) > TOUCH_EVERY:
                row.last_used_at = now
        return row

    async def seed_admin(self, session: AsyncSession, token: str | None) -> str | None:
        """Ensure an admin key exists. Returns a newly generated key (to print once) or None.

        Under the Postgres lock `SEED_ADMIN` until the session's transaction ends: two
        processes starting at once on one database would both find no key and both insert."""
        await lock_session_transaction(session, SEED_ADMIN)
        repo = ApiKeyRepository(session)
        if token:
            if await repo.get_by(key_hash=hash_key(token)) is None:
                await self.add_key(
                    session, token, name="admin (QUIVER_ADMIN_TOKEN)", scopes=["admin"]
                )
            return None
        if await repo.count_active_admin() > 0:
            return None
        key = generate_key()
        await self.add_key(session, key, name="admin (generated at first start)", scopes=["admin"])
        return key


api_key_service = ApiKeyService()
