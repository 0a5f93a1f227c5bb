"""Removes secret values from logs, error bodies, events and tool results.

Secrets are registered as they are decrypted (the ORM column types call `register_secret`),
so any later text that contains one is masked without each call site having to know.
A secret is registered in every form it can take on the wire or in an upstream's echo of it
(`wire_forms`: raw, percent-encoded as a path or query value, form-encoded, JSON-escaped);
the password inside a URL is registered on its own, and basic auth registers the base64 of
`user:password` (`register_basic`).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from typing import Any
from urllib.parse import quote, quote_plus

from app.security.db_url import url_secrets

MASK = "***"
_MIN_LEN = 4
"""Values under credential-looking keys (token, password, api_key, …) are masked from 4 chars."""
_MIN_LEN_OTHER = 8
"""Other decrypted values (env entries, headers) only from 8 chars, so `"DEBUG": "true"` does not
mask every `true` in tool output."""
_CREDENTIAL_KEY = re.compile(r"(?i)token|secret|pass|key|auth|credential|cookie|session|signature")
_lock = threading.Lock()
_secrets: set[str] = set()
_CHUNK = 256
"""Forms per compiled pattern: registering one more secret recompiles only the newest chunk."""
_sealed: list[re.Pattern[str]] = []
_open: set[str] = set()
_compiled: tuple[re.Pattern[str], ...] = ()
_stale = False
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@")
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}")
_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")
_URL_SAFE = ("", "/", "/:@!$&'()*+,;=")
"""`quote` safe sets: a query value (httpx, urlencode), a path (`quote` default), a lenient path."""


def wire_forms(secret: str) -> set[str]:
    """Every spelling of `secret` a request, a log line or an upstream's echo may carry."""
    forms = {secret}
    for encoded in (*(quote(secret, safe=s) for s in _URL_SAFE), quote_plus(secret, safe="")):
        forms.add(encoded)
        forms.add(_PERCENT_ESCAPE.sub(lambda m: m[0].lower(), encoded))
    for escaped in (json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]):
        forms.add(escaped)
        forms.add(escaped.replace("/", "\\/"))
    return forms


def register_secret(value: str | None, *, min_len: int = _MIN_LEN) -> None:
    """Register `value` (every wire form of it) and any password inside it if it is a URL."""
    if not value or len(value) < min_len:
        return
    for part in url_secrets(value):
        register_secret(part)
    _add(wire_forms(value))


def register_basic(username: str, password: str) -> None:
    """The `Authorization: Basic` token of these credentials."""
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    _add({token, token.rstrip("=")} if len(token) >= _MIN_LEN_OTHER else set())


def _add(forms: set[str]) -> None:
    global _stale
    with _lock:
        new = {form for form in forms if len(form) >= _MIN_LEN} - _secrets
        if not new:
            return
        _secrets.update(new)
        _open.update(new)
        if len(_open) >= _CHUNK:
            _sealed.append(re.compile(_trie_pattern(_open)))
            _open.clear()
        _stale = True


def _patterns() -> tuple[re.Pattern[str], ...]:
    """The compiled patterns, rebuilt lazily (once per burst of registrations)."""
    global _compiled, _stale
    if _stale:
        with _lock:
            if _stale:
                newest = (re.compile(_trie_pattern(_open)),) if _open else ()
                _compiled = (*_sealed, *newest)
                _stale = False
    return _compiled


def _trie_pattern(words: set[str]) -> str:
    """One regex for `words` as a prefix tree: it matches the longest word at each position and
    costs little per character however many words there are (a flat alternation does not)."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_node(root)


def _trie_node(node: dict[str, Any]) -> str:
    branches = []
    for char, child in sorted(node.items()):
        if not char:
            continue
        literal = [char]
        while len(child) == 1 and "" not in child:  # a chain of single children: one literal
            ((char, child),) = child.items()
            literal.append(char)
        branches.append(re.escape("".join(literal)) + _trie_node(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word may also end here: prefer the longer match, else stop
        return f"(?:{body})?"
    return body


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
    for pattern in _patterns():
        text = pattern.sub(MASK, text)
    # The two patterns scan every position of a text (~25 µs per KB each); a text without
    # what each must contain skips it (a tool's output of 10 KB is redacted three times).
    if "://" in text and "@" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    if _may_name_scheme(text):
        text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return text


def _may_name_scheme(text: str) -> bool:
    """False only when `_BEARER` cannot match: neither word appears in any case. Its `(?i)`
    also matches U+017F (long s) for s, and U+0131 (dotless i) and U+0130 (capital I with a
    dot) for i, which `lower()` keeps (U+0130 as i + U+0307)."""
    folded = text.lower()
    if not folded.isascii():
        folded = folded.replace("\u017f", "s").replace("\u0131", "i").replace("\u0307", "")
    return "bearer" in folded or "basic" in folded


def redact(value: Any) -> Any:
    """Redact every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
