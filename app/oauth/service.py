"""The OAuth server's operations for the routes: token, revocation, registration, consent; and
what the MCP endpoint and the console ask of issued tokens."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from authlib.oauth2 import OAuth2Error
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.agents.models import Agent
from app.apikeys.models import ApiKey
from app.config import Settings
from app.db.base import utcnow
from app.errors import NotFound
from app.oauth.metadata import base_url
from app.oauth.models import OAuthClient, OAuthToken
from app.oauth.repository import OAuthRepository
from app.oauth.requests import FormRequest, RegistrationRequest
from app.oauth.secrets import hash_secret
from app.oauth.server import (
    Consent,
    QuiverAuthorizationServer,
    in_thread,
    key_may_use,
    refusal,
)
from app.tenancy.principal import Principal

MAX_LISTED = 500


def request_base(settings: Settings, request: Request) -> str:
    """The issuer and audience base: `QUIVER_PUBLIC_URL`, else the request's scheme and host
    (the same for the OAuth routes and the MCP endpoint mounted below them)."""
    return base_url(settings.public_url, f"{request.url.scheme}://{request.url.netloc}")


def _pairs(items: list[tuple[str, object]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in items if isinstance(v, str)]


def _insecure(error: OAuth2Error) -> Response:
    return JSONResponse(
        {"error": error.error, "error_description": error.description}, status_code=400
    )


@dataclass(frozen=True)
class IssuedToken:
    """An OAuth grant's live token, as the console lists it (never the token itself)."""

    id: uuid.UUID
    client_name: str
    client_id: str
    agent_name: str
    key_name: str
    created_at: datetime
    access_expires_at: datetime
    refresh_expires_at: datetime | None


@dataclass(frozen=True)
class _Granting:
    """A valid authorization request and its grant: what the consent page and the person's
    decision both start from."""

    server: QuiverAuthorizationServer
    request: FormRequest
    agent: Agent
    grant: Any


class OAuthService:
    async def _prepared(
        self, session: AsyncSession, settings: Settings, request: Request, *, with_form: bool
    ) -> tuple[QuiverAuthorizationServer, FormRequest] | Response:
        """The authorization server for this request and the request as authlib reads it, or
        the error response (`insecure_transport`: plain http to a public host)."""
        base = request_base(settings, request)
        form: list[tuple[str, str]] = []
        if with_form:
            form = _pairs(list((await request.form()).multi_items()))
        try:
            built = FormRequest(
                request.method,
                base + request.url.path,
                request.headers,
                _pairs(list(request.query_params.multi_items())),
                form,
            )
        except OAuth2Error as error:
            return _insecure(error)
        return QuiverAuthorizationServer(session, settings, base), built

    async def token(self, session: AsyncSession, settings: Settings, request: Request) -> Response:
        prepared = await self._prepared(session, settings, request, with_form=True)
        if isinstance(prepared, Response):
            return prepared
        server, built = prepared
        response: Response = await in_thread(lambda: server.create_token_response(built))
        return response

    async def revoke(self, session: AsyncSession, settings: Settings, request: Request) -> Response:
        prepared = await self._prepared(session, settings, request, with_form=True)
        if isinstance(prepared, Response):
            return prepared
        server, built = prepared
        response: Response = await in_thread(
            lambda: server.create_endpoint_response("revocation", built)
        )
        return response

    async def register(
        self, session: AsyncSession, settings: Settings, request: Request
    ) -> Response:
        base = request_base(settings, request)
        try:
            body = await request.json()
        except ValueError:
            body = None
        server = QuiverAuthorizationServer(session, settings, base)
        built = RegistrationRequest(base + request.url.path, request.headers, body)
        response: Response = await in_thread(
            lambda: server.create_endpoint_response("client_registration", built)
        )
        return response

    async def _granting(
        self, session: AsyncSession, settings: Settings, request: Request, key: ApiKey
    ) -> _Granting | Response:
        """The authorization request with its grant, or the error response: a redirect to the
        client when its redirect URI is known to be its own, else `refusal` (raised)."""
        prepared = await self._prepared(session, settings, request, with_form=False)
        if isinstance(prepared, Response):
            return prepared
        server, built = prepared
        try:
            grant = await in_thread(lambda: server.get_consent_grant(built, end_user=key))
        except OAuth2Error as error:
            if error.redirect_uri:
                redirect: Response = server.handle_error_response(built, error)
                return redirect
            raise refusal(error) from None
        assert built.agent is not None
        return _Granting(server=server, request=built, agent=built.agent, grant=grant)

    async def consent(
        self, session: AsyncSession, settings: Settings, request: Request, key: ApiKey
    ) -> Consent | Response:
        """A valid authorization request to show the person, or the error response (see
        `_granting`)."""
        granting = await self._granting(session, settings, request, key)
        if isinstance(granting, Response):
            return granting
        return Consent(
            client=granting.request.client,
            agent=granting.agent,
            redirect_uri=granting.grant.redirect_uri,
            scope=granting.request.scope or "",
        )

    async def decide(
        self,
        session: AsyncSession,
        settings: Settings,
        request: Request,
        key: ApiKey,
        *,
        approve: bool,
    ) -> Response:
        """The person's decision: a redirect to the client with a code, or `access_denied`."""
        granting = await self._granting(session, settings, request, key)
        if isinstance(granting, Response):
            return granting
        granted = key if approve and key_may_use(key, granting.agent.id) else None
        server, built, grant = granting.server, granting.request, granting.grant
        response: Response = await in_thread(
            lambda: server.create_authorization_response(built, grant_user=granted, grant=grant)
        )
        return response

    # --- the resource side -----------------------------------------------------------------

    async def authenticate(
        self, session: AsyncSession, token: str, resource: str, *, user: str | None
    ) -> Principal | str:
        """The principal an access token stands for at `resource`, else why not. The token acts
        as a chat key of the person who consented, limited to that one agent (§8): their key's
        id (tenancy, run rate limit) and nothing more."""
        repo = OAuthRepository(session)
        row = await repo.token_by_access(hash_secret(token))
        now = utcnow()
        if row is None or row.revoked_at is not None:
            return "invalid or revoked access token"
        expires = row.access_expires_at
        if (expires if expires.tzinfo else expires.replace(tzinfo=now.tzinfo)) <= now:
            return "expired access token"
        if row.resource != resource:
            return "the access token is for another resource (RFC 8707 audience)"
        key = await repo.active_key(row.api_key_id)
        if key is None or not key_may_use(key, row.agent_id):
            return "the key that consented is revoked or may no longer use this agent"
        return Principal(
            key_id=key.id,
            admin=False,
            user=user,
            agent_ids=frozenset({str(row.agent_id)}),
            rate_limit_per_minute=key.rate_limit_per_minute,
        )

    # --- the console -----------------------------------------------------------------------

    async def live_tokens(self, session: AsyncSession, principal: Principal) -> list[IssuedToken]:
        """Working tokens: every one for an admin, else those consented with the viewer's key."""
        rows = await OAuthRepository(session).live_tokens(
            utcnow(), api_key_id=None if principal.admin else principal.key_id, limit=MAX_LISTED
        )
        return [_issued(token, client, agent, key) for token, client, agent, key in rows]

    async def revoke_by_id(
        self, session: AsyncSession, token_id: uuid.UUID, principal: Principal
    ) -> None:
        """Revoke a grant from the console: an admin any, a person their own (else 404)."""
        repo = OAuthRepository(session)
        row = await repo.token(token_id)
        if row is None or not (principal.admin or row.api_key_id == principal.key_id):
            raise NotFound(f"OAuth token {str(token_id)!r} not found")
        await repo.revoke_grant(row.grant_id, utcnow())


def _issued(token: OAuthToken, client: OAuthClient, agent: Agent, key: ApiKey) -> IssuedToken:
    return IssuedToken(
        id=token.id,
        client_name=client.client_name or client.client_id,
        client_id=client.client_id,
        agent_name=agent.name,
        key_name=key.name,
        created_at=token.created_at,
        access_expires_at=token.access_expires_at,
        refresh_expires_at=token.refresh_expires_at,
    )


oauth_service = OAuthService()
