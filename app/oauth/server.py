"""Authlib's authorization server on Quiver's storage.

Authlib does the protocol: request validation, client authentication, PKCE, the grants, error
responses (RFC 6749, 7636, 7009, 7591). Its hooks are synchronous, so each protocol step runs
in a worker thread and every hook that needs storage runs its query back on the event loop
(`anyio.from_thread.run`) in the request's session; the thread waits, the session is never
used by two tasks at once. One `AuthorizationServer` is built per request, bound to that
request's session and base URL.

What Quiver adds on top: PKCE is required and S256 only; the authorization request must name
an agent endpoint as its `resource` (RFC 8707), which the code and every token are bound to;
codes are claimed once (a reused code revokes what it issued); refresh tokens rotate (a spent
one presented again revokes the whole grant).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from authlib.oauth2 import AuthorizationServer, OAuth2Error
from authlib.oauth2.rfc6749 import (
    AuthorizationCodeGrant,
    InvalidRequestError,
    RefreshTokenGrant,
)
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.responses import JSONResponse, Response

from app.agents.models import Agent
from app.apikeys.models import ApiKey
from app.config import Settings
from app.db.base import utcnow
from app.errors import QuiverError
from app.oauth.metadata import (
    AUTH_METHODS,
    agent_of,
    canonical_resource,
    resource_url,
)
from app.oauth.models import SCOPE, OAuthClient, OAuthCode, OAuthToken
from app.oauth.registration import Registration
from app.oauth.repository import OAuthRepository
from app.oauth.requests import FormRequest, RegistrationRequest
from app.oauth.secrets import ACCESS_PREFIX, CODE_PREFIX, REFRESH_PREFIX, hash_secret, new_secret
from app.tenancy.principal import Principal

# Authlib logs issued tokens at DEBUG: never let them reach the logs.
logging.getLogger("authlib").setLevel(logging.WARNING)

T = TypeVar("T")


class InvalidTargetError(OAuth2Error):  # type: ignore[misc]
    """RFC 8707 §2: the `resource` is missing, not an agent endpoint here, or not the one the
    grant is bound to."""

    error = "invalid_target"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=utcnow().tzinfo)


def key_may_use(key: ApiKey, agent_id: uuid.UUID) -> bool:
    """A key with scope chat or admin that may use the agent (§8)."""
    return bool({"admin", "chat"} & set(key.scopes)) and Principal.of(key).may_use(agent_id)


# --- the grants and endpoints ----------------------------------------------------------


class _Pkce(CodeChallenge):  # type: ignore[misc]
    """PKCE on every authorization request, S256 only (OAuth 2.1, the MCP spec)."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant: Any, redirect_uri: str) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send 'code_challenge'")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("'code_challenge_method' must be S256")
        super().validate_code_challenge(grant, redirect_uri)

    def validate_code_verifier(self, grant: Any, result: Any) -> None:
        if not grant.request.form.get("code_verifier"):
            raise InvalidRequestError("Missing 'code_verifier'")
        super().validate_code_verifier(grant, result)


class _CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    server: QuiverAuthorizationServer
    request: FormRequest

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        try:
            self.server.bind_resource(self.request)
        except OAuth2Error as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: FormRequest) -> None:
        server = self.server
        assert request.agent is not None
        assert request.resource is not None
        data = request.payload.data
        row = OAuthCode(
            code_hash=hash_secret(code),
            client_row_id=request.client.id,
            api_key_id=request.user.id,
            agent_id=request.agent.id,
            resource=request.resource,
            redirect_uri=data.get("redirect_uri") or "",
            scope=request.scope or "",
            code_challenge=data["code_challenge"],
            code_challenge_method=data["code_challenge_method"],
            created_at=server.now,
            expires_at=server.now + timedelta(seconds=server.settings.oauth_code_ttl_s),
        )
        server.run(server.repo.prune_codes, server.now - timedelta(days=1))
        server.run(server.repo.add, row)

    def generate_authorization_code(self) -> str:
        return new_secret(CODE_PREFIX)

    def query_authorization_code(self, code: str, client: OAuthClient) -> OAuthCode | None:
        server = self.server
        row = server.run(server.repo.code, hash_secret(code), client.id)
        if row is None:
            return None
        if not server.run(server.repo.claim_code, row.id, server.now):
            # Used before: what it issued is revoked (RFC 6749 §4.1.2).
            server.run(server.repo.revoke_grant, row.id, server.now)
            return None
        return row if _aware(row.expires_at) > server.now else None

    def delete_authorization_code(self, authorization_code: OAuthCode) -> None:
        """Nothing left to do: the code was claimed when it was read."""

    def authenticate_user(self, authorization_code: OAuthCode) -> ApiKey | None:
        return self.server.person(authorization_code.api_key_id, authorization_code.agent_id)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: OAuthCode = self.request.authorization_code
        self.server.check_resource(self.request, code.resource)


class _RefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation
    server: QuiverAuthorizationServer
    request: FormRequest

    def authenticate_refresh_token(self, refresh_token: str) -> OAuthToken | None:
        server = self.server
        row = server.run(server.repo.token_by_refresh, hash_secret(refresh_token))
        if row is None or not row.check_client(self.request.client):
            return None
        if row.revoked_at is None:
            expires = row.refresh_expires_at
            if expires is None or _aware(expires) <= server.now:
                return None
            # Checked before the token is spent: a wrong `resource` leaves the grant as it was.
            server.check_resource(self.request, row.resource)
        if row.revoked_at is not None or not server.run(
            server.repo.claim_refresh, row.id, server.now
        ):
            # A spent (rotated) or revoked refresh token: whoever holds it, the grant ends.
            server.run(server.repo.revoke_grant, row.grant_id, server.now)
            return None
        return row

    def authenticate_user(self, refresh_token: OAuthToken) -> ApiKey | None:
        return self.server.person(refresh_token.api_key_id, refresh_token.agent_id)

    def revoke_old_credential(self, refresh_token: OAuthToken) -> None:
        """Nothing left to do: the old row was revoked when its refresh token was claimed."""


class _Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = AUTH_METHODS
    server: QuiverAuthorizationServer

    def query_token(self, token_string: str, token_type_hint: str | None) -> OAuthToken | None:
        server, digest = self.server, hash_secret(token_string)
        if token_type_hint != "refresh_token":
            row = server.run(server.repo.token_by_access, digest)
            if row is not None or token_type_hint == "access_token":
                return row
        return server.run(server.repo.token_by_refresh, digest)

    def revoke_token(self, token: OAuthToken, request: FormRequest) -> None:
        """Revoking either token of a grant ends the whole grant."""
        self.server.run(self.server.repo.revoke_grant, token.grant_id, self.server.now)


# --- the server ----------------------------------------------------------------------------


class QuiverAuthorizationServer(AuthorizationServer):  # type: ignore[misc]
    def __init__(self, session: AsyncSession, settings: Settings, base: str) -> None:
        super().__init__(scopes_supported=[SCOPE])
        self.repo = OAuthRepository(session)
        self.settings = settings
        self.base = base
        self.now = utcnow()
        self.register_token_generator("default", self._generate_token)
        self.register_grant(_CodeGrant, [_Pkce(required=True)])
        self.register_grant(_RefreshGrant)
        self.register_endpoint(_Revocation)
        self.register_endpoint(Registration(self))

    # Storage, from the worker thread the protocol step runs in.
    def run(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        return anyio.from_thread.run(fn, *args)

    def person(self, key_id: uuid.UUID, agent_id: uuid.UUID) -> ApiKey | None:
        """The consenting person's key, while it is active and may still use the agent."""
        key = self.run(self.repo.active_key, key_id)
        return key if key is not None and key_may_use(key, agent_id) else None

    def bind_resource(self, request: FormRequest) -> None:
        """The authorization request's agent endpoint (RFC 8707 `resource`), which must exist."""
        resource = request.payload.data.get("resource")
        if len(request.payload.datalist.get("resource", [])) > 1:
            raise InvalidTargetError("one 'resource' only: the agent's MCP endpoint")
        name = agent_of(resource, self.base) if resource else None
        if name is None:
            raise InvalidTargetError(
                f"'resource' must be an agent's MCP endpoint: {resource_url(self.base, '<agent>')}"
            )
        agent = self.run(self.repo.agent_by_name, name)
        if agent is None:
            raise InvalidTargetError(f"no agent named {name!r}")
        request.agent = agent
        request.resource = resource_url(self.base, name)

    def check_resource(self, request: FormRequest, bound: str) -> None:
        """A token request may repeat the `resource`; it must be the one the grant is for."""
        given = request.form.get("resource")
        if given is not None and canonical_resource(given, self.base) != bound:
            raise InvalidTargetError("'resource' differs from the one this grant is bound to")

    def _generate_token(
        self,
        grant_type: str,
        client: OAuthClient,
        user: ApiKey | None = None,
        scope: str | None = None,
        expires_in: int | None = None,
        include_refresh_token: bool = True,
    ) -> dict[str, Any]:
        token: dict[str, Any] = {
            "token_type": "Bearer",
            "access_token": new_secret(ACCESS_PREFIX),
            "expires_in": self.settings.oauth_access_token_ttl_s,
            "scope": scope or SCOPE,
        }
        if include_refresh_token:
            token["refresh_token"] = new_secret(REFRESH_PREFIX)
        return token

    def save_token(self, token: Mapping[str, Any], request: FormRequest) -> None:
        source: OAuthCode | OAuthToken | None = request.authorization_code or request.refresh_token
        assert source is not None
        grant_id = source.id if isinstance(source, OAuthCode) else source.grant_id
        refresh = token.get("refresh_token")
        ttl = self.settings
        row = OAuthToken(
            access_hash=hash_secret(token["access_token"]),
            refresh_hash=hash_secret(refresh) if refresh else None,
            client_row_id=request.client.id,
            api_key_id=request.user.id,
            agent_id=source.agent_id,
            grant_id=grant_id,
            resource=source.resource,
            scope=token.get("scope") or SCOPE,
            access_expires_at=self.now + timedelta(seconds=ttl.oauth_access_token_ttl_s),
            refresh_expires_at=(
                self.now + timedelta(seconds=ttl.oauth_refresh_token_ttl_s) if refresh else None
            ),
        )
        self.run(self.repo.add, row)

    def query_client(self, client_id: str) -> OAuthClient | None:
        return self.run(self.repo.client, client_id)

    def create_oauth2_request(self, request: Any) -> FormRequest:
        assert isinstance(request, FormRequest)
        return request

    def create_json_request(self, request: Any) -> RegistrationRequest:
        assert isinstance(request, RegistrationRequest)
        return request

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> Response:
        plain = [(k, v) for k, v in headers if k.lower() != "content-type"]
        if isinstance(body, dict):
            return JSONResponse(body, status_code=status, headers=dict(plain))
        return Response(body or b"", status_code=status, headers=dict(plain))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Authlib's hook for framework signals: none here."""


async def in_thread(fn: Callable[[], T]) -> T:
    """A synchronous Authlib step, whose storage hooks come back to this event loop."""
    return await anyio.to_thread.run_sync(fn)


@dataclass(frozen=True)
class Consent:
    """A valid authorization request, waiting for the person's decision."""

    client: OAuthClient
    agent: Agent
    redirect_uri: str
    scope: str


def refusal(error: OAuth2Error) -> QuiverError:
    """An authorization request that cannot be sent back to the client (unknown client or
    redirect URI): shown to the person instead."""
    detail = error.description or error.error
    return QuiverError(f"{error.error}: {detail}", status_code=400)
