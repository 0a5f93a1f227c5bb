"""Small text helpers for what the model reads: one-liners, capped lists, compact JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from app.tools.truncate import truncate_for_model

MAX_OUTPUT_CHARS = 20_000
"""Cap on one tool result's text; longer output is cut with a hint."""


def one_line(text: str | None, limit: int | None = None) -> str:
    """Collapse whitespace to single spaces; cut to `limit` chars as `limit-3` + `...`."""
    flat = " ".join((text or "").split())
    if limit is not None and len(flat) > limit:
        return flat[: limit - 3] + "..."
    return flat


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


def capped(lines: Sequence[str], limit: int, *, noun: str, hint: str = "") -> list[str]:
    """At most `limit` lines, then `(showing limit/N <noun>; <hint>)`."""
    if len(lines) <= limit:
        return list(lines)
    note = f"(showing {limit}/{len(lines)} {noun}"
    return [*lines[:limit], note + (f"; {hint})" if hint else ")")]


def clip_output(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    """Shorten a long result for the model with a hint saying what was cut."""
    if len(text) <= limit:
        return text
    return truncate_for_model(text, max_chars=limit)


def model_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The parameters schema the model sees: an object schema without `x-` extension keys."""
    clean = _strip_extensions(schema or {})
    if not isinstance(clean, dict):
        clean = {}
    if clean.get("type") != "object":
        clean = {**clean, "type": "object"}
    clean.setdefault("properties", {})
    return clean


_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def _strip_extensions(value: Any, *, names: bool = False) -> Any:
    """Drop `x-*` keywords; keys of `properties`-like maps are names, kept as they are."""
    if isinstance(value, dict):
        return {
            k: _strip_extensions(v, names=not names and k in _NAME_MAPS)
            for k, v in value.items()
            if names or not (isinstance(k, str) and k.startswith("x-"))
        }
    if isinstance(value, list):
        return [_strip_extensions(v) for v in value]
    return value
