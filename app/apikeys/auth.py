"""API-key authentication: `Authorization: Bearer <key>`, scopes `admin` and `chat`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.apikeys.cache import ApiKeyCache
from app.apikeys.models import ApiKey
from app.apikeys.service import api_key_service
from app.db.session import SessionDep
from app.errors import Forbidden, QuiverError, Unauthorized
from app.security.throttle import FailedAuthThrottle


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return token.strip()


async def _lookup(request: Request, token: str) -> ApiKey | None:
    """The key behind `token`: from the cache when no storage is needed, else in a session of
    its own (committed: the use it records stands whatever the route does next)."""
    runtime = getattr(request.app.state, "runtime", None)
    cache: ApiKeyCache | None = getattr(runtime, "keys", None)
    if cache is not None and (key := cache.cached(token)) is not None:
        return key
    maker: async_sessionmaker[AsyncSession] = request.app.state.sessionmaker
    async with maker() as session:
        if cache is not None:
            key = await cache.authenticate(session, token)
        else:
            key = await api_key_service.authenticate(session, token)
        if session.in_transaction():
            await session.commit()
    return key


def failed_attempt(app: Any, client: tuple[str, int] | None, error: QuiverError) -> QuiverError:
    """What a failed key attempt from `client` answers: `error`, or a 429 once the address
    is over its limit (`app/security/throttle.py`). Valid keys never come here."""
    throttle: FailedAuthThrottle | None = getattr(
        getattr(app.state, "runtime", None), "auth_throttle", None
    )
    refused = throttle.failed(client[0] if client else None) if throttle else None
    return refused or error


async def _authenticate(request: Request) -> ApiKey:
    """Without the request's session (`SessionDep`): a route served from the in-process caches
    then opens none (docs/benchmarks.md, "MCP call overhead")."""
    key = await _lookup(request, _bearer(request))
    if key is None:
        client = (request.client.host, request.client.port) if request.client else None
        raise failed_attempt(request.app, client, Unauthorized("invalid or revoked API key"))
    return key


async def require_admin(key: Annotated[ApiKey, Depends(_authenticate)]) -> ApiKey:
    if "admin" not in key.scopes:
        raise Forbidden("this route needs an API key with scope 'admin'")
    return key


ChatKeyFallback = Callable[[Request, AsyncSession], Awaitable[ApiKey | None]]
"""Another way to name a chat-scope key when no `Authorization` header is sent; the app
factory registers the console's session check as `app.state.chat_key_fallback`."""


async def _authenticate_chat(request: Request, session: SessionDep) -> ApiKey:
    """A bearer key, or else what the registered fallback (the console session) names."""
    fallback: ChatKeyFallback | None = getattr(request.app.state, "chat_key_fallback", None)
    if "authorization" not in request.headers and fallback is not None:
        key = await fallback(request, session)
        if key is not None:
            return key
    return await _authenticate(request)


async def require_chat(key: Annotated[ApiKey, Depends(_authenticate_chat)]) -> ApiKey:
    if not {"admin", "chat"} & set(key.scopes):
        raise Forbidden("this route needs an API key with scope 'chat' or 'admin'")
    return key


AdminKey = Depends(require_admin)
ChatKey = Depends(require_chat)
