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

from app.security.db_url import url_secrets
from app.security.redact import wire_forms

_NONE = type(None)
_PLAIN: frozenset[type] = frozenset({str, int, bool, _NONE})
_NUMBERS: frozenset[type] = frozenset({float, int, bool, _NONE})
_FLOAT_DIGITS = 15
_MAX_MESSAGE_CHARS = 600
_URL_RE = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\"<>]+")
_PASSWORD_RE = re.compile(r"(password|passwd|pwd)\s*[=:]\s*\S+", re.IGNORECASE)


def json_rows(rows: Iterable[Sequence[Any]], *, typed: bool = False) -> list[list[Any]]:
    """Rows as lists of JSON-serialisable values.

    Works on columns: the engines decode numbers, dates and UUIDs as text at the driver,
    so most columns are only checked, never rebuilt. `typed=True` (PostgreSQL, MySQL:
    one type per column) checks a column by its first non-null value; SQLite columns
    can mix types, so every value is looked at.
    """
    materialised = rows if isinstance(rows, list) else list(rows)
    if not materialised:
        return []
    out: list[list[Any]] | None = None
    for i in range(len(materialised[0])):
        if typed and _typed_column_is_safe(materialised, i):
            continue
        column = [row[i] for row in materialised]
        fixed = _json_column(column)
        if fixed is None:
            continue
        if out is None:
            out = list(map(list, materialised))
        for row, value in zip(out, fixed, strict=True):
            row[i] = value
    return out if out is not None else list(map(list, materialised))


def _typed_column_is_safe(rows: Sequence[Sequence[Any]], i: int) -> bool:
    probe = rows[0][i]
    if probe is None:
        probe = next((row[i] for row in rows if row[i] is not None), None)
    if type(probe) in _PLAIN:  # numbers decoded from text are finite
        return True
    if type(probe) is float:  # NaN and ±inf propagate through a sum
        try:
            return math.isfinite(sum([row[i] for row in rows], 0.0))
        except (TypeError, OverflowError):  # NULLs or huge values: check one by one
            return False
    return False


def _json_column(column: list[Any]) -> list[Any] | None:
    """The column made JSON-safe, or None when it already is."""
    kinds = set(map(type, column))
    if kinds <= _PLAIN:
        return None
    if kinds <= _NUMBERS:
        values = [v for v in column if v is not None] if _NONE in kinds else column
        try:
            # NaN and ±inf propagate through a sum; a finite total means every value is.
            if math.isfinite(sum(values, 0.0)):
                return None
        except OverflowError:
            pass
    plain = _PLAIN
    return [v if type(v) in plain else json_value(v) for v in column]


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
    secrets = {url}
    for part in url_secrets(url):
        secrets |= wire_forms(part)
    # Longest first so a password inside the URL is not replaced piecemeal.
    return sorted({s for s in secrets if len(s) >= 3}, key=len, reverse=True)
