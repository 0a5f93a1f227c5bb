"""Agents with everything the run pipeline reads from them, cached in process by id.

A run starts from the agent and its links (connectors with their actions, databases, MCP
servers, skills, knowledge bases): six queries through the ORM, the actions through
`ActionCatalog` (app/connectors/catalog.py), which keeps them across reloads and reads again
only a connector whose stored stamps changed. Agents are kept here, tagged with the version of
`app/db/changes.py`, which any committed write to those tables moves on (in this worker at
once, in the others through the run hub's `NOTIFY`). An entry is also read again after
`max_age_s`, and nothing is served while the worker cannot hear the others.

The cached rows are detached and shared by concurrent runs: they are read, never changed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.models import (
    Agent,
    agent_connectors,
    agent_databases,
    agent_delegates,
    agent_knowledge_bases,
    agent_mcp_servers,
    agent_skills,
)
from app.agents.repository import AgentRepository
from app.connectors.catalog import ACTIONS, ActionCatalog
from app.connectors.models import Connector, ConnectorAction
from app.databases.models import DatabaseConnector
from app.db import changes
from app.knowledge.models import KnowledgeBase, KnowledgeDocument
from app.mcp.models import McpServer
from app.skills.models import Skill

changes.watch(
    Agent,
    agent_connectors,
    agent_databases,
    agent_mcp_servers,
    agent_skills,
    agent_knowledge_bases,
    agent_delegates,
    Connector,
    ConnectorAction,
    DatabaseConnector,
    McpServer,
    Skill,
    KnowledgeBase,
    KnowledgeDocument,
)


@dataclass(frozen=True, slots=True)
class _Entry:
    version: int
    loaded_at: float
    agent: Agent


class AgentCache:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_age_s: float = 60.0,
        size: int = 1024,
        actions: ActionCatalog = ACTIONS,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._actions = actions
        self._max_age_s = max_age_s
        self._size = size
        self._items: OrderedDict[uuid.UUID, _Entry] = OrderedDict()
        self._loading: dict[tuple[uuid.UUID, int], asyncio.Future[Agent | None]] = {}

    def _fresh(self, entry: _Entry | None) -> bool:
        return (
            entry is not None
            and entry.version == changes.version()
            and time.monotonic() - entry.loaded_at < self._max_age_s
            and changes.trusted()
        )

    async def get(self, agent_id: uuid.UUID) -> Agent | None:
        """The agent with its links (None: no such agent)."""
        entry = self._items.get(agent_id)
        if entry is not None and self._fresh(entry):
            return entry.agent
        version = changes.version()
        key = (agent_id, version)
        loading = self._loading.get(key)
        if loading is not None:  # another request is loading it: one query for all
            return await asyncio.shield(loading)
        future: asyncio.Future[Agent | None] = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            agent = await self._load(agent_id)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters (if any) get it too
            raise
        else:
            future.set_result(agent)
        finally:
            self._loading.pop(key, None)
        if agent is not None and changes.trusted():
            # Tagged with the version seen *before* loading: a write meanwhile makes it stale.
            self._items[agent_id] = _Entry(version, time.monotonic(), agent)
            self._items.move_to_end(agent_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return agent

    async def _load(self, agent_id: uuid.UUID) -> Agent | None:
        async with self._sessionmaker() as session:
            agent = await AgentRepository(session).get_for_run(agent_id)
            if agent is not None:
                await self._actions.attach(session, agent.connectors)
            return agent

    def clear(self) -> None:
        self._items.clear()
