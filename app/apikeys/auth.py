"""API-key authentication: `Authorization: Bearer <key>`, scopes `admin` and `chat`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.apikeys.models import ApiKey
from app.apikeys.service import api_key_service
from app.db.session import SessionDep
from app.errors import Forbidden, Unauthorized


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


async def require_chat(key: Annotated[ApiKey, Depends(_authenticate)]) -> ApiKey:
    if not {"admin", "chat"} & set(key.scopes):
        raise Forbidden("this route needs an API key with scope 'chat' or 'admin'")
    return key


AdminKey = Depends(require_admin)
ChatKey = Depends(require_chat)
