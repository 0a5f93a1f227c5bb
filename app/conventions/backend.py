"""`recall_knowledge` back-end: conventions from the table, scoped by directory.

See docs/contract.md §6.4.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.conventions.models import Convention
from app.conventions.recall import recall_conventions, search_conventions
from app.conventions.repository import ConventionRepository
from app.tools.base import ToolResult


class ConventionBackend(Protocol):
    """What the `recall_knowledge` built-in calls (implemented by `ConventionRecall`)."""

    async def recall(
        self, *, query: str, limit: int, directory: str | None, scope: str | None
    ) -> ToolResult: ...


async def _in_language(session: AsyncSession, language: str) -> list[Convention]:
    """Rows of one language, matched case-insensitively like `recall_conventions` does."""
    stmt = (
        select(Convention)
        .where(func.lower(Convention.language) == language.lower())
        .order_by(Convention.created_at, Convention.id)
    )
    return list((await session.execute(stmt)).scalars().all())


class ConventionRecall:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker

    async def recall(
        self, *, query: str, limit: int, directory: str | None, scope: str | None
    ) -> ToolResult:
        scoped = scope == "conventions" and directory is not None
        async with self._sessionmaker() as session:
            if scoped:
                rows = await _in_language(session, query)
            else:
                rows = await ConventionRepository(session).for_language(None)
        if scoped:
            lines = recall_conventions(rows, language=query, directory=directory, limit=limit)
        else:
            lines = search_conventions(rows, query, limit)
        if not lines:
            where = f" for {directory!r}" if scoped else ""
            return ToolResult.success(f"No conventions found{where} matching {query!r}.")
        return ToolResult.success("\n".join(lines))
