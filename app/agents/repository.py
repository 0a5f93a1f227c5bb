from __future__ import annotations

import uuid
from collections.abc import Sequence

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

    async def recent_ids(self, limit: int) -> list[uuid.UUID]:
        """The most recently changed agents' ids, newest first."""
        rows = await self.session.scalars(
            select(Agent.id).order_by(Agent.updated_at.desc()).limit(limit)
        )
        return list(rows)
