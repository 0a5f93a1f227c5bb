"""Shorten tool output for the model, keeping JSON valid where it can and saying what was cut.

JSON arrays longer than `max_items` keep their first items and gain a hint line
`[showing 10/N items, keys: a, b, c]` (keys of the object items, so the model knows
what it could filter on). Objects get the same treatment for their array-valued members,
one level down (the usual `{"data": [...], "total": N}` envelope). Whatever is still longer
than `max_chars` is cut on a character boundary and ends with `[Truncated: N chars total]`.
"""

from __future__ import annotations

import json
from typing import Any

_MAX_KEYS_IN_HINT = 12


def truncate_for_model(text: str, *, max_chars: int = 8000, max_items: int = 10) -> str:
    """Return `text` shortened for the model, with a hint describing any cut."""
    hints: list[str] = []
    if len(text) <= max_chars and text.count(",") < max_items:
        return text  # too few separators for any list to exceed max_items
    parsed = _parse_json(text)
    if parsed is not None:
        shortened, hints = _shorten_json(parsed[0], max_items=max_items)
        if hints:
            text = _dump(shortened)
    return _cut(text, hints, max_chars=max_chars)


def _dump(value: Any) -> str:
    """Compact JSON, one list item per line (cheap in tokens, easy to scan)."""
    if isinstance(value, list):
        return "[\n" + ",\n".join(json.dumps(v, ensure_ascii=False) for v in value) + "\n]"
    return json.dumps(value, ensure_ascii=False)


def _parse_json(text: str) -> tuple[Any] | None:
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return (json.loads(text),)
    except ValueError:
        return None


def _shorten_json(value: Any, *, max_items: int) -> tuple[Any, list[str]]:
    if isinstance(value, list):
        short, hint = _shorten_list(value, max_items=max_items)
        return short, [hint] if hint else []
    if isinstance(value, dict):
        hints: list[str] = []
        out: dict[str, Any] = {}
        for key, item in value.items():
            if isinstance(item, list):
                short, hint = _shorten_list(item, max_items=max_items)
                out[key] = short
                if hint:
                    hints.append(f"{key}: {hint}")
            else:
                out[key] = item
        if hints:
            hints.append("keys: " + _join_keys(list(value)))
        return out, hints
    return value, []


def _shorten_list(items: list[Any], *, max_items: int) -> tuple[list[Any], str]:
    if len(items) <= max_items:
        return items, ""
    hint = f"showing {max_items}/{len(items)} items"
    keys = _item_keys(items)
    if keys:
        hint += ", keys: " + _join_keys(keys)
    return items[:max_items], hint


def _item_keys(items: list[Any]) -> list[str]:
    keys: dict[str, None] = {}
    for item in items[:50]:
        if isinstance(item, dict):
            keys.update(dict.fromkeys(str(k) for k in item))
    return list(keys)


def _join_keys(keys: list[str]) -> str:
    shown = ", ".join(keys[:_MAX_KEYS_IN_HINT])
    if len(keys) > _MAX_KEYS_IN_HINT:
        shown += f", … (+{len(keys) - _MAX_KEYS_IN_HINT})"
    return shown


def _cut(text: str, hints: list[str], *, max_chars: int) -> str:
    head = "".join(f"[{hint}]\n" for hint in hints)
    if len(text) <= max_chars:
        return head + text
    return f"{head}{text[:max_chars]}\n[Truncated: {len(text)} chars total]"
