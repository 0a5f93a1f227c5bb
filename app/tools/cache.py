"""Warm-cache for texts and tool definitions derived from stored rows.

Assembly runs on every request with freshly loaded rows, so identity cannot be the key:
a row's `(id, updated_at)` (plus its children's, for connectors) is. Every write bumps
`updated_at`, so an edited row misses and is rebuilt. Rows not yet persisted (no id or
timestamp) are never cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from threading import Lock
from typing import Any, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 4096


class DerivedCache:
    """A small LRU of values derived from rows, keyed by what they were derived from."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = Lock()
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable | None, build: Callable[[], T]) -> T:
        if key is None:
            return build()
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key]  # type: ignore[no-any-return]
        value = build()
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0


def row_key(row: Any, *extra: Hashable) -> tuple[Hashable, ...] | None:
    """`(table, id, updated_at, *extra)`, or None for a row that was never persisted."""
    ident = getattr(row, "id", None)
    stamp = getattr(row, "updated_at", None)
    if ident is None or stamp is None:
        return None
    return (type(row).__name__, ident, stamp, *extra)


DERIVED = DerivedCache()
"""The process-wide cache; its entries are immutable (strings, frozen tool definitions)."""
