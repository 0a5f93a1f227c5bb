"""The one DB session dependency: commit on success, roll back on error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


def get_sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    return maker


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    async with get_sessionmaker(request)() as session:
        try:
            yield session
        except Exception:
            await session.rollback()
            raise
        else:
            if session.in_transaction() or session.new or session.dirty or session.deleted:
                await session.commit()  # (a request that read from caches only has nothing to)


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
"""`scope="function"`: commit before the response is sent, so a 2xx means the write is durable
and a failing commit becomes an error response (FastAPI's default runs the exit code after)."""


async def _sessionmaker_dep(request: Request) -> async_sessionmaker[AsyncSession]:
    return get_sessionmaker(request)  # async: FastAPI runs a plain `def` in a worker thread


SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(_sessionmaker_dep)]
