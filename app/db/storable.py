"""What may be stored: PostgreSQL keeps no NUL character (U+0000) in text or JSON columns
(`invalid byte sequence` / `\\u0000 cannot be converted to text`), SQLite would. Every write
replaces NUL with U+FFFD (the replacement character) on both stores, so a run that meets one —
in the model's tool arguments or text, a fetched page, an MCP result — is stored the same way
everywhere and never fails its journal.

The one implementation, used by every writer: the SQLAlchemy engines (`engine.py`: the JSON
serializer and a statement hook for text parameters), the run path's and the audit sink's
asyncpg statements (`json_text`, `params`), and the journal (`value`, so live events equal
stored ones). Request bodies never get here with a NUL: the request guard answers 422.
"""

from __future__ import annotations

import json
from typing import Any

NUL = "\x00"
MARK = "\ufffd"
"""What a NUL character becomes in storage."""


def text(value: str) -> str:
    return value.replace(NUL, MARK) if NUL in value else value


def value(item: Any) -> Any:
    """`item` (strings, lists, tuples, dicts, keys too) with every NUL replaced; the same
    object when it has none."""
    if isinstance(item, str):
        return text(item)
    if isinstance(item, dict):
        return {text(k) if isinstance(k, str) else k: value(v) for k, v in item.items()}
    if isinstance(item, list | tuple):
        cleaned = [value(v) for v in item]
        return cleaned if isinstance(item, list) else tuple(cleaned)
    return item


def json_text(item: Any) -> str:
    """The JSON text of `item` for a JSON column, without NUL (escaped or raw)."""
    encoded = json.dumps(item, separators=(",", ":"))
    if "\\u0000" not in encoded:
        return encoded
    return json.dumps(value(item), separators=(",", ":"))


def json_or_none(item: Any) -> str | None:
    return None if item is None else json_text(item)


def params(args: Any) -> Any:
    """Statement parameters (a tuple, a list of them, a dict; arrays as lists) without NUL;
    the same object when none has one (the common case costs one scan)."""
    return value(args) if _has_nul(args) else args


def _has_nul(item: Any) -> bool:
    if isinstance(item, str):
        return NUL in item
    if isinstance(item, dict):
        return any(_has_nul(v) for v in item.values())
    if isinstance(item, list | tuple):
        return any(_has_nul(v) for v in item)
    return False
