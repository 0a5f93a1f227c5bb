"""The retention setting: conversations (with their messages, runs, journals and approvals)
with no activity for `QUIVER_HISTORY_RETENTION_DAYS` days are deleted, once at start and then
every hour. 0 (the default) keeps history until `DELETE /conversations/{id}`. Deleting an
agent, connector, database or MCP server never removes history; tool-call audit rows are kept
(they name their run, which may be gone).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.operator_repository import ConversationQueryRepository
from app.db.base import utcnow

logger = logging.getLogger("quiver.retention")
SWEEP_EVERY_S = 3600.0


async def expire_history(sessionmaker: async_sessionmaker[AsyncSession], days: int) -> int:
    """Delete the conversations idle for more than `days` days (none running); how many."""
    cutoff = utcnow() - timedelta(days=days)
    async with sessionmaker() as session:
        removed = await ConversationQueryRepository(session).remove_idle_since(cutoff)
        await session.commit()
    if removed:
        logger.info("retention: deleted %d conversations idle for %d days", removed, days)
    return removed


class RetentionSweeper:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession], days: int) -> None:
        self._sessionmaker = sessionmaker
        self._days = days
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._days > 0 and self._task is None:
            self._task = asyncio.create_task(self._loop(), name="history-retention")

    async def _loop(self) -> None:
        while True:
            try:
                await expire_history(self._sessionmaker, self._days)
            except Exception:  # storage away: the next sweep tries again
                logger.exception("retention sweep failed")
            await asyncio.sleep(SWEEP_EVERY_S)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            self._task = None
