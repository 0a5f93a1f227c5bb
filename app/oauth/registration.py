"""RFC 7591 dynamic client registration (Authlib's endpoint on Quiver's storage)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint

from app.oauth.metadata import authorization_server_metadata
from app.oauth.models import SCOPE, OAuthClient
from app.oauth.requests import RegistrationRequest
from app.oauth.secrets import hash_secret, new_secret

if TYPE_CHECKING:
    from app.oauth.server import QuiverAuthorizationServer


class Registration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """Open registration (RFC 7591 §3, as the MCP spec expects): anyone may register a client;
    nothing is granted until a person consents."""

    server: QuiverAuthorizationServer

    def authenticate_token(self, request: RegistrationRequest) -> bool:
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        return authorization_server_metadata(self.server.base)

    def extract_client_metadata(self, request: RegistrationRequest) -> dict[str, Any]:
        metadata: dict[str, Any] = super().extract_client_metadata(request)
        uris = metadata.get("redirect_uris")
        if not isinstance(uris, list) or not uris or len(uris) > 20:
            raise InvalidClientMetadata("'redirect_uris': one to 20 URIs are required")
        for uri in uris:
            if not isinstance(uri, str) or len(uri) > 2000 or not _allowed_redirect(uri):
                raise InvalidClientMetadata(
                    "'redirect_uris': https, a loopback http address, or an app's own scheme"
                )
        metadata.setdefault("grant_types", ["authorization_code"])
        metadata.setdefault("response_types", ["code"])
        metadata["scope"] = SCOPE
        return metadata

    def generate_client_secret(self, request: RegistrationRequest) -> str | None:
        method = request.payload.data.get("token_endpoint_auth_method")
        return None if method == "none" else new_secret()

    def generate_client_info(self, request: RegistrationRequest) -> dict[str, Any]:
        info: dict[str, Any] = super().generate_client_info(request)
        if info.get("client_secret") is None:
            info.pop("client_secret", None)
            info.pop("client_secret_expires_at", None)
        return info

    def save_client(
        self,
        client_info: dict[str, Any],
        client_metadata: dict[str, Any],
        request: RegistrationRequest,
    ) -> OAuthClient:
        secret = client_info.get("client_secret")
        row = OAuthClient(
            client_id=client_info["client_id"],
            secret_hash=hash_secret(secret) if secret else None,
            client_name=str(client_metadata.get("client_name") or "")[:200],
            redirect_uris=list(client_metadata["redirect_uris"]),
            grant_types=list(client_metadata["grant_types"]),
            response_types=list(client_metadata["response_types"]),
            token_endpoint_auth_method=client_metadata["token_endpoint_auth_method"],
            scope=SCOPE,
            client_metadata=client_metadata,
        )
        self.server.run(self.server.repo.add, row)
        return row


class InvalidClientMetadata(OAuth2Error):  # type: ignore[misc]
    error = "invalid_client_metadata"


def _loopback(uri: str) -> bool:
    host = (urlsplit(uri).hostname or "").lower()
    return host in ("localhost", "127.0.0.1", "::1")


def _allowed_redirect(uri: str) -> bool:
    """https, http to a loopback address (native apps, RFC 8252), or an app's own scheme."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme in ("javascript", "data", "file", "vbscript"):
        return False
    return scheme != "http" or _loopback(uri)
