"""The OAuth server's URLs and metadata documents (RFC 8414, RFC 9728).

The base URL is `QUIVER_PUBLIC_URL` when set, else the request's own (scheme, host and root
path). Each agent endpoint `<base>/mcp/agents/<name>` is a protected resource; its metadata
sits at `<base>/.well-known/oauth-protected-resource/mcp/agents/<name>` (RFC 9728 §3.1, where
the MCP authorization spec looks first) and names the gateway itself as the authorization
server.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlsplit

from app.oauth.models import SCOPE

AGENT_PATH = "/mcp/agents/"
PRM_PATH = "/.well-known/oauth-protected-resource"
AS_PATH = "/.well-known/oauth-authorization-server"
AUTHORIZE_PATH = "/oauth/authorize"
TOKEN_PATH = "/oauth/token"
REGISTER_PATH = "/oauth/register"
REVOKE_PATH = "/oauth/revoke"
AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]
GRANT_TYPES = ["authorization_code", "refresh_token"]


def base_url(public_url: str, request_base: str) -> str:
    """The issuer: the configured public URL, else the request's base URL."""
    return (public_url or request_base).rstrip("/")


def resource_url(base: str, agent_name: str) -> str:
    return f"{base}{AGENT_PATH}{quote(agent_name, safe='')}"


def resource_metadata_url(base: str, agent_name: str) -> str:
    return f"{base}{PRM_PATH}{AGENT_PATH}{quote(agent_name, safe='')}"


def agent_of(resource: str, base: str) -> str | None:
    """The agent name a `resource` (RFC 8707) names on this gateway, else None. Scheme and
    host compare without case; a trailing slash is ignored; a query or fragment is refused."""
    try:
        parts, ours = urlsplit(resource), urlsplit(base)
    except ValueError:
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    if (parts.scheme.lower(), parts.netloc.lower()) != (ours.scheme.lower(), ours.netloc.lower()):
        return None
    prefix = ours.path.rstrip("/") + AGENT_PATH
    path = parts.path.rstrip("/")
    if not path.startswith(prefix):
        return None
    name = unquote(path[len(prefix) :])
    return name if name and "/" not in name else None


def canonical_resource(resource: str, base: str) -> str | None:
    name = agent_of(resource, base)
    return None if name is None else resource_url(base, name)


def authorization_server_metadata(base: str) -> dict[str, Any]:
    return {
        "issuer": base,
        "authorization_endpoint": base + AUTHORIZE_PATH,
        "token_endpoint": base + TOKEN_PATH,
        "registration_endpoint": base + REGISTER_PATH,
        "revocation_endpoint": base + REVOKE_PATH,
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "grant_types_supported": GRANT_TYPES,
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
    }


def protected_resource_metadata(base: str, agent_name: str) -> dict[str, Any]:
    return {
        "resource": resource_url(base, agent_name),
        "authorization_servers": [base],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": f"Quiver agent {agent_name}",
    }
