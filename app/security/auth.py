"""API-key authentication: `Authorization: Bearer <key>`, scopes `admin` and `chat`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.apikeys.models import ApiKey
from app.apikeys.service import api_key_service
from app.db.session import SessionDep
from app.errors import Forbidden, Unauthorized, error_body
from app.ui.api_auth import console_api_key, has_console_credentials


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return token.strip()


async def _authenticate(request: Request, session: SessionDep) -> ApiKey:
    key = await api_key_service.authenticate(session, _bearer(request))
    if key is None:
        raise Unauthorized("invalid or revoked API key")
    request.state.api_key_id = str(key.id)
    return key


async def require_admin(key: Annotated[ApiKey, Depends(_authenticate)]) -> ApiKey:
    if "admin" not in key.scopes:
        raise Forbidden("this route needs an API key with scope 'admin'")
    return key


async def _authenticate_chat(request: Request, session: SessionDep) -> ApiKey:
    """A bearer key, or else the console's session cookie with its CSRF header."""
    if "authorization" not in request.headers:
        key = await console_api_key(request, session)
        if key is not None:
            request.state.api_key_id = str(key.id)
            return key
    return await _authenticate(request, session)


async def require_chat(key: Annotated[ApiKey, Depends(_authenticate_chat)]) -> ApiKey:
    if not {"admin", "chat"} & set(key.scopes):
        raise Forbidden("this route needs an API key with scope 'chat' or 'admin'")
    return key


AdminKey = Depends(require_admin)
ChatKey = Depends(require_chat)


class BearerPrecheck:
    """Pure ASGI: a request to the API without any bearer key gets its 401 before the body is
    parsed (otherwise malformed JSON would answer 422 first). Keys are verified by the route
    dependencies as before."""

    def __init__(self, app: ASGIApp, *, prefix: str = "/api/") -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            header = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, token = header.decode("latin-1").partition(" ")
            console = has_console_credentials(
                dict(scope["headers"]).get(b"cookie", b"").decode("latin-1"),
                dict(scope["headers"]).get(b"x-csrf-token", b"").decode("latin-1"),
            )
            if (scheme.lower() != "bearer" or not token.strip()) and not console:
                response = JSONResponse(
                    error_body(
                        "Unauthorized", "missing API key: send 'Authorization: Bearer <key>'"
                    ),
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
