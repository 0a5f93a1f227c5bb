"""The one DB session dependency: commit on success, roll back on error."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


def _sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    return maker


async def get_sessionmaker(request: Request) -> async_sessionmaker[AsyncSession]:
    """`async def`: FastAPI runs a plain `def` dependency in a worker thread."""
    return _sessionmaker(request)


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    async with _sessionmaker(request)() as session:
        try:
            yield session
        except Exception:
            await session.rollback()
            raise
        else:
            if session.in_transaction():  # a request that read nothing has nothing to commit
                await session.commit()


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
"""`scope="function"`: commit before the response is sent, so a 2xx means the write is durable
and a failing commit becomes an error response (FastAPI's default runs the exit code after)."""
SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(get_sessionmaker)]
