"""Auth injection from decrypted connector credentials, and redaction of those secrets."""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.connectors.models import Connector
from app.security.redact import register_basic, wire_forms

REDACTED = "***"
_MIN_SECRET_LEN = 4
_SECRET_KEY = re.compile(
    r"pass(word|wd)?|secret|token|api[-_]?key|apikey|auth|credential|cookie|session|private",
    re.IGNORECASE,
)


class AuthError(Exception):
    """The connector's auth settings cannot produce a request (message is safe to show)."""


@dataclass(kw_only=True)
class AuthParts:
    headers: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)

    @property
    def header_names(self) -> tuple[str, ...]:
        return tuple(self.headers)


def build_auth(connector: Connector) -> AuthParts:
    """Headers and query parameters carrying the connector's credentials."""
    kind = connector.auth_type or "none"
    config = connector.auth_config or {}
    creds = connector.credentials or {}
    if kind == "none":
        return AuthParts()
    if kind == "bearer":
        token = _need(creds, "token", connector)
        prefix = str(config.get("token_prefix") or "Bearer")
        return AuthParts(headers={"Authorization": f"{prefix} {token}"})
    if kind == "api_key":
        key = _need(creds, "api_key", connector)
        if config.get("query_param"):
            return AuthParts(params={str(config["query_param"]): key})
        return AuthParts(headers={str(config.get("header_name") or "X-API-Key"): key})
    if kind == "basic":
        user = _need(creds, "username", connector)
        password = str(creds.get("password") or "")
        encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
        register_basic(user, password)
        return AuthParts(headers={"Authorization": f"Basic {encoded}"})
    raise AuthError(f"Connector {connector.name!r} has unknown auth_type {kind!r}")


def _need(creds: Mapping[str, Any], key: str, connector: Connector) -> str:
    value = creds.get(key)
    if not value:
        raise AuthError(
            f"Connector {connector.name!r} uses {connector.auth_type!r} auth but its "
            f"credentials have no {key!r}"
        )
    return str(value)


class Redactor:
    """Replaces known secret values (and their encodings) in text and argument trees."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found = {form for s in secrets if len(s) >= _MIN_SECRET_LEN for form in wire_forms(s)}
        self._secrets = sorted(found, key=len, reverse=True)

    @classmethod
    def for_connector(cls, connector: Connector, auth: AuthParts | None = None) -> Redactor:
        values = [str(v) for v in (connector.credentials or {}).values() if v]
        if auth is not None:
            values += [v.split(" ", 1)[-1] for v in auth.headers.values()]
            values += list(auth.params.values())
        return cls(values)

    def text(self, value: str) -> str:
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def arguments(self, value: Any, *, key: str = "") -> Any:
        """A copy of `value` with secret-named keys and known secret values masked."""
        if key and _SECRET_KEY.search(key) and value not in (None, ""):
            return REDACTED
        if isinstance(value, Mapping):
            return {str(k): self.arguments(v, key=str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.arguments(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value
