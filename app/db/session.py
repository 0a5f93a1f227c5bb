"""The one DB session dependency: commit on success, roll back on error."""

from __future__ import annotations

import contextlib
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


def _idle(session: AsyncSession) -> bool:
    """Nothing to release: no transaction (so no connection) and no object held or pending."""
    return not session.in_transaction() and not session.identity_map and not session.new


@contextlib.asynccontextmanager
async def request_session(maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A request's session: committed on success, rolled back on error. It opens no connection
    until first used; one never used (a request served from the in-process caches) is dropped
    without `close()`, a greenlet round trip that would release nothing (docs/benchmarks.md,
    "MCP call overhead")."""
    session = maker()
    try:
        yield session
    except Exception:
        await session.rollback()
        raise
    else:
        if session.in_transaction():  # a request that read nothing has nothing to commit
            await session.commit()
    finally:
        if not _idle(session):
            await session.close()


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """`request_session` as the routes' dependency."""
    async with request_session(_sessionmaker(request)) as session:
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session, scope="function")]
"""`scope="function"`: commit before the response is sent, so a 2xx means the write is durable
and a failing commit becomes an error response (FastAPI's default runs the exit code after)."""
SessionmakerDep = Annotated[async_sessionmaker[AsyncSession], Depends(get_sessionmaker)]
