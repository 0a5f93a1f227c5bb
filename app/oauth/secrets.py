"""Random secrets of the OAuth server and how they are stored (a SHA-256 hex digest)."""

from __future__ import annotations

import hashlib
import secrets

ACCESS_PREFIX = "qvo_"
"""OAuth access tokens start with this: the MCP endpoint tells them from API keys (`qv_`)."""
REFRESH_PREFIX = "qvr_"
CODE_PREFIX = "qvc_"


def hash_secret(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def new_secret(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(32)


def is_access_token(token: str) -> bool:
    return token.startswith(ACCESS_PREFIX)
