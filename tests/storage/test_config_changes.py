"""Which committed writes move the configuration version that cached agents and keys check."""

from __future__ import annotations

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession

import app.agents.cache
import app.apikeys.cache  # noqa: F401 - registers api_keys
from app.agents.models import Agent
from app.apikeys.models import ApiKey
from app.apikeys.repository import ApiKeyRepository
from app.connectors.models import Connector
from app.db import changes
from app.db.base import utcnow
from app.knowledge.models import KnowledgeBase, KnowledgeDocument
from app.skills.models import Skill


async def _key(session: AsyncSession) -> ApiKey:
    key = ApiKey(name="k", key_hash=utcnow().isoformat(), prefix="qv_", scopes=["chat"])
    session.add(key)
    await session.commit()
    return key


async def test_writes_to_watched_tables_move_the_version(session: AsyncSession) -> None:
    before = changes.version()
    session.add(Agent(name="cached-agent"))
    await session.commit()
    after_insert = changes.version()
    assert after_insert != before

    await session.execute(update(Connector).values(description="bulk"))
    await session.commit()
    assert changes.version() != after_insert


async def test_knowledge_bases_and_their_documents_move_the_version(session: AsyncSession) -> None:
    """The knowledge tool's description counts an agent's documents: a new one must show."""
    before = changes.version()
    base = KnowledgeBase(name="cached-kb")
    session.add(base)
    await session.commit()
    with_base = changes.version()
    assert with_base != before
    session.add(
        KnowledgeDocument(
            knowledge_base_id=base.id,
            name="d.md",
            format="markdown",
            text="x",
            chars=1,
            chunk_count=0,
        )
    )
    await session.commit()
    assert changes.version() != with_base


async def test_the_use_of_a_key_and_unwatched_writes_do_not(session: AsyncSession) -> None:
    key = await _key(session)
    before = changes.version()
    await ApiKeyRepository(session).touch(key.id, utcnow())  # `last_used_at`, on the connection
    await session.commit()
    key.last_used_at = utcnow()  # the ORM way, the column that does not count
    await session.commit()
    assert changes.version() == before
    key.name = "renamed"
    await session.commit()
    assert changes.version() != before


async def test_a_rolled_back_write_does_not(session: AsyncSession) -> None:
    before = changes.version()
    session.add(Skill(name="rolled-back", description="", content="x"))
    await session.flush()
    await session.rollback()
    await session.commit()
    assert changes.version() == before


async def test_caches_are_not_trusted_while_a_listener_is_deaf() -> None:
    owner = object()
    changes.set_deaf(owner, True)
    try:
        assert not changes.trusted()
        before = changes.version()
    finally:
        changes.set_deaf(owner, False)
    assert changes.trusted()
    assert changes.version() != before  # what was written meanwhile is dropped
