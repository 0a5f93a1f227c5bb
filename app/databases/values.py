"""Result values made JSON-safe, and driver messages made safe to show."""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
import re
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from sqlalchemy.engine import make_url

_PLAIN: frozenset[type] = frozenset({str, int, bool, type(None)})
_FLOAT_DIGITS = 15
_MAX_MESSAGE_CHARS = 600
_URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_RAW_PASSWORD_RE = re.compile(r"://[^:/@\s]*:([^@\s]+)@")
_PASSWORD_RE = re.compile(r"(password|passwd|pwd)\s*[=:]\s*\S+", re.IGNORECASE)


def json_rows(rows: Iterable[Sequence[Any]]) -> list[list[Any]]:
    """Rows as lists of JSON-serialisable values.

    Works column by column: most columns hold only plain values (the engines decode
    numbers, dates and UUIDs as text at the driver), so they are checked, not rebuilt.
    """
    out = [list(row) for row in rows]
    if not out:
        return out
    for i in range(len(out[0])):
        kinds = {type(row[i]) for row in out} - _PLAIN
        if not kinds:
            continue
        if kinds == {float} and all(math.isfinite(row[i]) for row in out if type(row[i]) is float):
            continue
        for row in out:
            value = row[i]
            if type(value) not in _PLAIN:
                row[i] = json_value(value)
    return out


def number_from_text(text: str) -> int | float | str:
    """A DECIMAL/NUMERIC's text as an int or float when exact enough, else the text."""
    if len(text) <= _FLOAT_DIGITS and text[-1:].isdigit():
        return float(text) if "." in text else int(text)
    return text


def json_value(value: Any) -> Any:
    """One database value as a JSON-safe value."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        return _decimal(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    if isinstance(value, uuid.UUID | ipaddress.IPv4Address | ipaddress.IPv6Address):
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(str(v) for v in value)
    return str(value)


def _decimal(value: Decimal) -> int | float | str:
    if not value.is_finite():
        return str(value)
    if value == value.to_integral_value() and abs(value) < 2**53:
        return int(value)
    if len(value.as_tuple().digits) <= _FLOAT_DIGITS:
        return float(value)
    return str(value)


def clean_driver_message(exc: BaseException, url: str) -> str:
    """The driver's message without the connector URL, password or any other URL."""
    message = _driver_message(exc)
    for secret in _url_secrets(url):
        message = message.replace(secret, "***")
    message = _URL_RE.sub("<url>", message)
    message = _PASSWORD_RE.sub(r"\1=***", message)
    message = " ".join(message.split())
    if len(message) > _MAX_MESSAGE_CHARS:
        message = message[: _MAX_MESSAGE_CHARS - 1] + "…"
    return message or type(exc).__name__


def _driver_message(exc: BaseException) -> str:
    original = getattr(exc, "original", None) or getattr(exc, "orig", None) or exc
    args: tuple[Any, ...] = tuple(getattr(original, "args", ()))
    if len(args) == 2 and isinstance(args[0], int):  # PyMySQL: (errno, message)
        return f"({args[0]}) {args[1]}"
    text = str(getattr(original, "message", None) or original)
    hint = getattr(original, "hint", None)
    return f"{text} (hint: {hint})" if hint else text


def _url_secrets(url: str) -> list[str]:
    secrets = [url]
    raw = _RAW_PASSWORD_RE.search(url)
    if raw:
        secrets += [raw.group(1), unquote(raw.group(1))]
    try:
        parsed = make_url(url)
    except Exception:
        return secrets
    if parsed.password:
        password = str(parsed.password)
        secrets += [password, unquote(password)]
    # Longest first so a password inside the URL is not replaced piecemeal.
    return sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True)
