"""Legacy tool names: sanitised to `[a-zA-Z0-9_-]{1,64}` and unique within one toolset."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

MAX_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]+")


@lru_cache(maxsize=1 << 16)
def sanitize_tool_name(raw: str) -> str:
    """Replace each run of characters outside `[a-zA-Z0-9_-]` with `_`; cut to 64. Cached:
    every assembly names a legacy catalog's couple of thousand tools again."""
    name = _INVALID.sub("_", raw)[:MAX_NAME]
    return name or "tool"


class NameAllocator:
    """Hands out unique sanitised names; a collision gets `_2`, `_3`, … (still ≤ 64 chars)."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._used: set[str] = set(reserved)

    def allocate(self, raw: str) -> str:
        base = sanitize_tool_name(raw)
        name = base
        n = 1
        while name in self._used:
            n += 1
            suffix = f"_{n}"
            name = base[: MAX_NAME - len(suffix)] + suffix
        self._used.add(name)
        return name
