"""How write-only secrets appear in responses: never the value."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from app.security.redact import MASK


def mask_values(value: dict[str, Any] | None) -> dict[str, str]:
    """`{"TOKEN": "abc"}` → `{"TOKEN": "***"}`: keys stay visible so admins know what is set."""
    return dict.fromkeys(value or {}, MASK)


def mask_url(url: str) -> str:
    """`postgresql://u:pw@h:5432/db` → `postgresql://u:***@h:5432/db` (no password, no query)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    if parts.password is None and not parts.query:
        return url
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}:{MASK}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, MASK if parts.query else "", ""))
