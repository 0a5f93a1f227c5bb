"""The OAuth server's public routes (no API key: a client has none yet; docs/oauth.md).

The authorization endpoint (`/oauth/authorize`) is the console's consent page
(`app/ui/pages_oauth.py`): it needs the person's console sign-in.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse, Response

from app.db.session import SessionDep
from app.kit.state import SettingsDep
from app.oauth.metadata import (
    AGENT_PATH,
    AS_PATH,
    PRM_PATH,
    REGISTER_PATH,
    REVOKE_PATH,
    TOKEN_PATH,
    authorization_server_metadata,
    protected_resource_metadata,
)
from app.oauth.service import oauth_service, request_base

router = APIRouter(include_in_schema=False)
AgentName = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[^/]+$")]
_CACHE = {"Cache-Control": "public, max-age=300"}


@router.get(AS_PATH)
async def authorization_server(request: Request, settings: SettingsDep) -> Response:
    """RFC 8414 metadata."""
    return JSONResponse(authorization_server_metadata(request_base(settings, request)), 200, _CACHE)


@router.get(PRM_PATH + AGENT_PATH + "{agent_name}")
async def protected_resource(
    request: Request, settings: SettingsDep, agent_name: AgentName
) -> Response:
    """RFC 9728 metadata of one agent endpoint. Served for any name (no lookup), so it tells
    an anonymous caller nothing about which agents exist."""
    body = protected_resource_metadata(request_base(settings, request), agent_name)
    return JSONResponse(body, 200, _CACHE)


@router.post(REGISTER_PATH)
async def register(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """RFC 7591 dynamic client registration (open, as MCP clients expect)."""
    return await oauth_service.register(session, settings, request)


@router.post(TOKEN_PATH)
async def token(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """Authorization code (with PKCE) and refresh token grants."""
    return await oauth_service.token(session, settings, request)


@router.post(REVOKE_PATH)
async def revoke(request: Request, session: SessionDep, settings: SettingsDep) -> Response:
    """RFC 7009 revocation: either token of a grant ends the grant."""
    return await oauth_service.revoke(session, settings, request)
