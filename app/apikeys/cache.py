"""API keys cached in process by the hash of the key.

Every API request authenticates its bearer key; a hit here costs no query. Entries carry the
version of `app/db/changes.py`, which any committed write to `api_keys` other than the
`last_used_at` touch moves on (in this worker at once, in the others through the run hub's
`NOTIFY`): a revoked key or changed scopes take effect as soon as the notification arrives.
Entries are read again after `max_age_s`, and nothing is served while the worker cannot hear
the others. Unknown keys are never cached (every wrong key is looked up).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.models import ApiKey
from app.apikeys.repository import ApiKeyRepository
from app.apikeys.service import TOUCH_EVERY, hash_key
from app.db import changes
from app.db.base import utcnow

changes.watch(ApiKey, ignore=("last_used_at", "updated_at"))


@dataclass(slots=True)
class _Entry:
    version: int
    loaded_at: float
    key: ApiKey
    touched: datetime | None


class ApiKeyCache:
    def __init__(self, *, max_age_s: float = 60.0, size: int = 4096) -> None:
        self._max_age_s = max_age_s
        self._size = size
        self._items: OrderedDict[str, _Entry] = OrderedDict()

    async def authenticate(self, session: AsyncSession, key: str) -> ApiKey | None:
        """The active key (None: unknown or revoked); records its use once a minute."""
        digest = hash_key(key)
        entry = self._items.get(digest)
        now = time.monotonic()
        if (
            entry is None
            or entry.version != changes.version()
            or now - entry.loaded_at >= self._max_age_s
            or not changes.trusted()
        ):
            version = changes.version()
            row = await ApiKeyRepository(session).get_active_by_hash(digest)
            if row is None:
                self._items.pop(digest, None)
                return None
            session.expunge(row)  # shared with later requests: never flushed from here
            entry = _Entry(version, now, row, row.last_used_at)
            if changes.trusted():
                self._items[digest] = entry
                self._items.move_to_end(digest)
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
        moment = utcnow()
        last = entry.touched
        if last is None or moment - last.replace(tzinfo=moment.tzinfo) > TOUCH_EVERY:
            entry.touched = moment
            await ApiKeyRepository(session).touch(entry.key.id, moment)
        return entry.key

    def cached(self, key: str) -> ApiKey | None:
        """The key when `authenticate` would answer it from this cache without a query or a
        write (fresh entry, use recorded less than a minute ago); None: ask `authenticate`."""
        entry = self._items.get(hash_key(key))
        if (
            entry is None
            or entry.version != changes.version()
            or time.monotonic() - entry.loaded_at >= self._max_age_s
            or not changes.trusted()
            or entry.touched is None
        ):
            return None
        moment = utcnow()
        if moment - entry.touched.replace(tzinfo=moment.tzinfo) > TOUCH_EVERY:
            return None
        return entry.key

    def clear(self) -> None:
        self._items.clear()
