from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import selectinload
from sqlalchemy.orm.interfaces import ORMOption

from app.agents.models import Agent
from app.connectors.models import Connector
from app.kit.repository import RepositoryBase


class AgentRepository(RepositoryBase[Agent]):
    """Every read eager-loads what the pipeline needs (connectors with their actions)."""

    model = Agent

    def _options(self) -> Sequence[ORMOption]:
        return (
            selectinload(Agent.connectors).selectinload(Connector.actions),
            selectinload(Agent.databases),
            selectinload(Agent.mcp_servers),
            selectinload(Agent.skills),
            selectinload(Agent.knowledge_bases),
            selectinload(Agent.delegates),
        )

    async def get_for_run(self, id: uuid.UUID) -> Agent | None:
        """The agent with its links, its connectors' actions left unloaded: the agent cache
        sets them from `ActionCatalog` (app/connectors/catalog.py), which reads only what
        changed."""
        options = (selectinload(Agent.connectors), *self._options()[1:])
        stmt = select(Agent).options(*options).where(Agent.id == id)
        return (await self.session.execute(stmt)).scalars().unique().one_or_none()

    async def listing(
        self, ids: Collection[uuid.UUID] | None
    ) -> list[tuple[uuid.UUID, str, datetime]]:
        """(id, name, created_at) of every agent, or of those in `ids`, by name (no loads)."""
        stmt = select(Agent.id, Agent.name, Agent.created_at).order_by(Agent.name)
        if ids is not None:
            stmt = stmt.where(Agent.id.in_(list(ids)))
        return [(row[0], row[1], row[2]) for row in (await self.session.execute(stmt)).all()]

    async def id_named(self, name: str) -> uuid.UUID | None:
        return await self.session.scalar(select(Agent.id).where(Agent.name == name))

    async def recent_ids(self, limit: int) -> list[uuid.UUID]:
        """The most recently changed agents' ids, newest first."""
        rows = await self.session.scalars(
            select(Agent.id).order_by(Agent.updated_at.desc()).limit(limit)
        )
        return list(rows)
