from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.agents.schemas import AgentCreate, AgentUpdate
from app.audit.tombstones import RemembersDeleted
from app.connectors.repository import ConnectorRepository
from app.databases.repository import DatabaseRepository
from app.errors import Invalid
from app.kit.crud import CrudService
from app.kit.repository import RepositoryBase
from app.knowledge.repository import KnowledgeBaseRepository
from app.mcp.repository import McpServerRepository
from app.skills.repository import SkillRepository

_LINKS: dict[str, tuple[str, type[RepositoryBase[Any]]]] = {
    "connector_ids": ("connectors", ConnectorRepository),
    "database_ids": ("databases", DatabaseRepository),
    "mcp_server_ids": ("mcp_servers", McpServerRepository),
    "skill_ids": ("skills", SkillRepository),
    "knowledge_base_ids": ("knowledge_bases", KnowledgeBaseRepository),
    "delegate_ids": ("delegates", AgentRepository),
}


class AgentService(RemembersDeleted, CrudService[Agent]):
    history_kind = "agent"
    repository = AgentRepository
    label = "agent"

    async def _resolve_links(
        self, session: AsyncSession, agent: Agent, fields: dict[str, Any]
    ) -> None:
        """Replace each link list the client sent; unknown ids are a 422 naming field and id."""
        for field, (attr, repo_cls) in _LINKS.items():
            if field not in fields or fields[field] is None:
                continue
            ids = list(dict.fromkeys(fields[field]))
            rows = await repo_cls(session).get_many(ids)
            found = {row.id for row in rows}
            missing = [str(i) for i in ids if i not in found]
            if missing:
                raise Invalid(f"{field}: unknown id(s) {', '.join(missing)}")
            if field == "delegate_ids" and agent.id in found:
                raise Invalid(f"{field}: an agent may not delegate to itself")
            by_id = {row.id: row for row in rows}
            setattr(agent, attr, [by_id[i] for i in ids])

    async def create(self, session: AsyncSession, data: AgentCreate) -> Agent:
        await self.ensure_name_free(session, data.name)
        agent = Agent(
            **data.model_dump(exclude=set(_LINKS)),
            connectors=[],
            databases=[],
            mcp_servers=[],
            skills=[],
            knowledge_bases=[],
            delegates=[],
        )
        await self._resolve_links(session, agent, data.model_dump(include=set(_LINKS)))
        await self.save(session, agent)
        return agent

    async def update(self, session: AsyncSession, id: uuid.UUID, data: AgentUpdate) -> Agent:
        agent = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        sent = data.model_dump(exclude_unset=True)
        for field in _LINKS:
            if field in sent and sent[field] is None:
                raise Invalid(f"{field}: may not be null (send [] to remove all links)")
        self.apply(agent, data, skip=frozenset(_LINKS))
        await self._resolve_links(session, agent, sent)
        return await self.save(session, agent)


agent_service = AgentService()
