"""Bearer credentials at the MCP endpoint: an API key, or an OAuth access token (docs/oauth.md).

Every 401 names the agent endpoint's protected-resource metadata (RFC 9728 §5.1), which is
where an OAuth-only client (Claude's and ChatGPT's connectors, the MCP Inspector) starts its
flow. An access token (`qvo_…`) stands for the key of the person who consented, limited to
the one agent endpoint it was issued for (its audience, RFC 8707).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.apikeys.auth import failed_attempt
from app.apikeys.cache import ApiKeyCache
from app.config import Settings
from app.errors import Unauthorized, error_body
from app.oauth.metadata import resource_metadata_url, resource_url
from app.oauth.secrets import is_access_token
from app.oauth.service import oauth_service, request_base
from app.tenancy.principal import USER_HEADER, Principal


def challenge(
    settings: Settings, request: Request, agent_name: str, detail: str, *, invalid: bool
) -> Response:
    """401 with `WWW-Authenticate: Bearer resource_metadata="…"` (and `error="invalid_token"`
    when a credential was sent but is not good here)."""
    url = resource_metadata_url(request_base(settings, request), agent_name or "-")
    value = f'Bearer resource_metadata="{url}"'
    if invalid:
        value = f'Bearer error="invalid_token", resource_metadata="{url}"'
    return JSONResponse(
        error_body("Unauthorized", detail), status_code=401, headers={"WWW-Authenticate": value}
    )


def refused(settings: Settings, request: Request, agent_name: str, detail: str) -> Response:
    """A credential that is not good here: the 401 challenge, or the 429 once the client's
    address has failed too often (`app/security/throttle.py`; a valid key always passes)."""
    client = (request.client.host, request.client.port) if request.client else None
    error = failed_attempt(request.app, client, Unauthorized(detail))
    if error.status_code == 401:
        return challenge(settings, request, agent_name, detail, invalid=True)
    return JSONResponse(
        error_body(error.kind, error.message), error.status_code, headers=error.headers()
    )


async def bearer_principal(
    settings: Settings,
    keys: ApiKeyCache,
    session: AsyncSession,
    request: Request,
    token: str,
    agent_name: str,
) -> Principal | Response:
    """Who the bearer credential stands for, or the 401/403 to answer."""
    user = request.headers.get(USER_HEADER) or None
    if is_access_token(token):
        audience = resource_url(request_base(settings, request), agent_name)
        found = await oauth_service.authenticate(session, token, audience, user=user)
        if isinstance(found, str):
            return refused(settings, request, agent_name, found)
        return found
    key = await keys.authenticate(session, token)
    if key is None:
        return refused(settings, request, agent_name, "invalid or revoked API key")
    if not {"admin", "chat"} & set(key.scopes):
        return JSONResponse(
            error_body("Forbidden", "this route needs an API key with scope 'chat' or 'admin'"),
            status_code=403,
        )
    return Principal.of(key, user=user)
