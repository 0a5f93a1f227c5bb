from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Column, ForeignKey, String, Table, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.connectors.models import Connector
from app.databases.models import DatabaseConnector
from app.db.base import Base, IdMixin, TimestampMixin
from app.knowledge.models import KnowledgeBase
from app.mcp.models import McpServer
from app.skills.models import Skill


def _link(table: str, column: str, target: str) -> Table:
    return Table(
        table,
        Base.metadata,
        Column("agent_id", Uuid, ForeignKey("agents.id", ondelete="CASCADE"), primary_key=True),
        Column(column, Uuid, ForeignKey(f"{target}.id", ondelete="CASCADE"), primary_key=True),
    )


agent_connectors = _link("agent_connectors", "connector_id", "connectors")
agent_databases = _link("agent_databases", "database_id", "database_connectors")
agent_mcp_servers = _link("agent_mcp_servers", "mcp_server_id", "mcp_servers")
agent_skills = _link("agent_skills", "skill_id", "skills")
agent_knowledge_bases = _link("agent_knowledge_bases", "knowledge_base_id", "knowledge_bases")
agent_delegates = _link("agent_delegates", "delegate_id", "agents")
"""The agents an agent may call with `call_agent` (docs/contract.md §12)."""


class Agent(IdMixin, TimestampMixin, Base):
    __tablename__ = "agents"

    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    instructions: Mapped[str] = mapped_column(Text, default="")
    model: Mapped[str | None] = mapped_column(String(128), default=None)
    model_config_json: Mapped[dict[str, Any]] = mapped_column(default=dict)
    tool_categories: Mapped[list[Any] | None] = mapped_column(default=None)
    """Allowed kinds (builtin, knowledge, skill, connector, database, mcp, agent); null = all."""

    connectors: Mapped[list[Connector]] = relationship(secondary=agent_connectors, lazy="raise")
    databases: Mapped[list[DatabaseConnector]] = relationship(
        secondary=agent_databases, lazy="raise"
    )
    mcp_servers: Mapped[list[McpServer]] = relationship(secondary=agent_mcp_servers, lazy="raise")
    skills: Mapped[list[Skill]] = relationship(secondary=agent_skills, lazy="raise")
    knowledge_bases: Mapped[list[KnowledgeBase]] = relationship(
        secondary=agent_knowledge_bases, lazy="raise"
    )
    delegates: Mapped[list[Agent]] = relationship(
        secondary=agent_delegates,
        primaryjoin=lambda: Agent.id == agent_delegates.c.agent_id,
        secondaryjoin=lambda: Agent.id == agent_delegates.c.delegate_id,
        lazy="raise",
    )

    @property
    def connector_ids(self) -> list[uuid.UUID]:
        return [c.id for c in self.connectors]

    @property
    def database_ids(self) -> list[uuid.UUID]:
        return [d.id for d in self.databases]

    @property
    def mcp_server_ids(self) -> list[uuid.UUID]:
        return [m.id for m in self.mcp_servers]

    @property
    def skill_ids(self) -> list[uuid.UUID]:
        return [s.id for s in self.skills]

    @property
    def knowledge_base_ids(self) -> list[uuid.UUID]:
        return [k.id for k in self.knowledge_bases]

    @property
    def delegate_ids(self) -> list[uuid.UUID]:
        return [d.id for d in self.delegates]
