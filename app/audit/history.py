"""What agents' past runs called: the tool-call audit read back for the co-use prior."""

from __future__ import annotations

import uuid
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.audit.repository import ToolCallRepository


class ToolHistoryBackend(Protocol):
    """What runtime selection reads (implemented by `ToolHistory`; see pipeline/couse.py)."""

    async def run_tool_sets(
        self, agent_id: uuid.UUID, *, runs: int, calls: int
    ) -> list[list[str]]: ...


class ToolHistory:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def run_tool_sets(self, agent_id: uuid.UUID, *, runs: int, calls: int) -> list[list[str]]:
        """The tool names (as the model called them) of the agent's most recent runs."""
        async with self._sessionmaker() as session:
            return await ToolCallRepository(session).run_tool_sets(agent_id, runs=runs, calls=calls)
