"""OAuth rows: registered clients (RFC 7591), authorization codes and issued tokens.

Only hashes of secrets are stored (client secrets, codes, access and refresh tokens: all
256-bit random, so SHA-256 is enough). The methods are the ones Authlib's grants call
(`ClientMixin`, `AuthorizationCodeMixin`, `TokenMixin`).
"""

from __future__ import annotations

import hmac
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, ForeignKey, String, Text, Uuid
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin, utcnow
from app.oauth.secrets import hash_secret

SCOPE = "mcp"
"""The one scope: use the agent's MCP endpoint as the person who consented."""


class OAuthClient(IdMixin, TimestampMixin, Base):
    __tablename__ = "oauth_clients"

    client_id: Mapped[str] = mapped_column(String(64), unique=True)
    secret_hash: Mapped[str | None] = mapped_column(String(64), default=None)
    """None for a public client (`token_endpoint_auth_method: none`)."""
    client_name: Mapped[str] = mapped_column(String(200), default="")
    redirect_uris: Mapped[list[Any]] = mapped_column(default=list)
    grant_types: Mapped[list[Any]] = mapped_column(default=list)
    response_types: Mapped[list[Any]] = mapped_column(default=list)
    token_endpoint_auth_method: Mapped[str] = mapped_column(String(32))
    scope: Mapped[str] = mapped_column(String(200), default=SCOPE)
    client_metadata: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """The registered metadata as stored (what the registration answered, no secret)."""

    # --- authlib ClientMixin ---
    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> str | None:
        return self.redirect_uris[0] if len(self.redirect_uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str:
        allowed = self.scope.split()
        if not scope:
            return " ".join(allowed)
        return " ".join(s for s in scope.split() if s in allowed)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return redirect_uri in self.redirect_uris

    def check_client_secret(self, client_secret: str) -> bool:
        if self.secret_hash is None:
            return False
        return hmac.compare_digest(self.secret_hash, hash_secret(client_secret))

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == self.token_endpoint_auth_method

    def check_response_type(self, response_type: str) -> bool:
        return response_type in self.response_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types


class OAuthCode(IdMixin, Base):
    """An authorization code: one person's consent for one client and one agent endpoint."""

    __tablename__ = "oauth_codes"

    code_hash: Mapped[str] = mapped_column(String(64), unique=True)
    client_row_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True
    )
    api_key_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("agents.id", ondelete="CASCADE"), index=True
    )
    resource: Mapped[str] = mapped_column(Text)
    redirect_uri: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(200), default="")
    code_challenge: Mapped[str] = mapped_column(String(128))
    code_challenge_method: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)

    # --- authlib AuthorizationCodeMixin ---
    def get_redirect_uri(self) -> str:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class OAuthToken(IdMixin, TimestampMixin, Base):
    """An access token and its refresh token. A refresh issues a new row and revokes this one
    (rotation); every row of one consent shares its `grant_id`, so reuse of a spent code or
    refresh token revokes them all."""

    __tablename__ = "oauth_tokens"

    access_hash: Mapped[str] = mapped_column(String(64), unique=True)
    refresh_hash: Mapped[str | None] = mapped_column(String(64), unique=True, default=None)
    client_row_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("oauth_clients.id", ondelete="CASCADE"), index=True
    )
    api_key_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    agent_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("agents.id", ondelete="CASCADE"), index=True
    )
    grant_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    resource: Mapped[str] = mapped_column(Text)
    """The audience (RFC 8707): the agent endpoint's URL the token is good for."""
    scope: Mapped[str] = mapped_column(String(200), default="")
    access_expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    refresh_expires_at: Mapped[datetime | None] = mapped_column(
        DateTime(timezone=True), default=None
    )
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    """Revoked, or refreshed (rotated): neither token of the row works any more."""

    # --- authlib TokenMixin (the parts the grants call) ---
    def check_client(self, client: OAuthClient) -> bool:
        return self.client_row_id == client.id

    def get_scope(self) -> str:
        return self.scope
