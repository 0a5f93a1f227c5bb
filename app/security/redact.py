"""Removes secret values from logs, error bodies, events and tool results.

Secrets are registered as they are decrypted (the ORM column types call `register_secret`),
so any later text that contains one is masked without each call site having to know.
"""

from __future__ import annotations

import re
import threading
from typing import Any

MASK = "***"
_MIN_LEN = 4
"""Values under credential-looking keys (token, password, api_key, …) are masked from 4 chars."""
_MIN_LEN_OTHER = 8
"""Other decrypted values (env entries, headers) only from 8 chars, so `"DEBUG": "true"` does not
mask every `true` in tool output."""
_CREDENTIAL_KEY = re.compile(r"(?i)token|secret|pass|key|auth|credential|cookie|session|signature")
_lock = threading.Lock()
_secrets: set[str] = set()
_pattern: re.Pattern[str] | None = None
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")


def register_secret(value: str | None, *, min_len: int = _MIN_LEN) -> None:
    global _pattern
    if not value or len(value) < min_len:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets.add(value)
        ordered = sorted(_secrets, key=len, reverse=True)
        _pattern = re.compile("|".join(re.escape(s) for s in ordered))


def register_secrets(value: Any, *, key: str = "") -> None:
    """Register the string leaves of a decrypted JSON value (short ones: credential keys only)."""
    if isinstance(value, str):
        register_secret(value, min_len=_MIN_LEN if _CREDENTIAL_KEY.search(key) else _MIN_LEN_OTHER)
    elif isinstance(value, dict):
        for name, leaf in value.items():
            register_secrets(leaf, key=str(name))
    elif isinstance(value, list):
        for leaf in value:
            register_secrets(leaf, key=key)


def redact_text(text: str) -> str:
    if not text:
        return text
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)


def redact(value: Any) -> Any:
    """Redact every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
