"""Rows of a watched table cached in process by id (see `app/db/changes.py`).

For configuration read on a hot path (an MCP server's row for each admin test call): an entry
carries the version of `app/db/changes.py` it was loaded under, which any committed write to a
watched table moves on (in this worker at once, in the others through the run hub's `NOTIFY`).
Entries are read again after `max_age_s`, and nothing is served while the worker cannot hear
the others. Cached rows are detached and shared: read them, never change them.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db import changes
from app.db.base import Base

M = TypeVar("M", bound=Base)


@dataclass(frozen=True, slots=True)
class _Entry(Generic[M]):
    version: int
    loaded_at: float
    row: M


class RowCache(Generic[M]):
    def __init__(
        self,
        model: type[M],
        sessionmaker: async_sessionmaker[AsyncSession],
        *,
        max_age_s: float = 60.0,
        size: int = 1024,
    ) -> None:
        changes.watch(model)
        self._model = model
        self._sessionmaker = sessionmaker
        self._max_age_s = max_age_s
        self._size = size
        self._items: OrderedDict[uuid.UUID, _Entry[M]] = OrderedDict()

    async def get(self, id: uuid.UUID) -> M | None:
        """The row (None: no such row): a fresh one held, else read in a session of its own (a
        hit opens none)."""
        entry = self._items.get(id)
        if (
            entry is not None
            and entry.version == changes.version()
            and time.monotonic() - entry.loaded_at < self._max_age_s
            and changes.trusted()
        ):
            return entry.row
        version = changes.version()  # seen before loading: a write meanwhile makes it stale
        async with self._sessionmaker() as session:
            row = await session.get(self._model, id)
            if row is None:
                self._items.pop(id, None)
                return None
            session.expunge(row)  # shared with later requests: never flushed from here
        if changes.trusted():
            self._items[id] = _Entry(version, time.monotonic(), row)
            self._items.move_to_end(id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return row

    def clear(self) -> None:
        self._items.clear()
