"""Connectors' actions kept in process across agent reloads, keyed by exactly what is stored.

The agent cache (`app/agents/cache.py`) reloads an agent after any configuration change
anywhere (another agent created, a key's scope edited) and after 60 s. For an agent with a
couple of thousand legacy tools most of that reload was its actions: 2,044 rows and 2.8 MB of
JSON schemas, 0.2 to 0.45 s before the first byte of the chat that found it stale. This catalog
keeps each connector's actions between loads. Each load still reads every action's
`(id, updated_at)` (one narrow query, ~10 ms for 2,044 actions) and uses an entry only when
they are exactly the entry's: an action added, edited (the ORM stamps `updated_at` on every
write) or removed, a resync, a deleted connector, all change them, whichever worker wrote it
and whatever its clock says. Actions are served in the store's order (the stamps' order), so a
connector's tool order is the same whether its actions came from here or from the store.

An OpenAPI import (and a re-import) puts what it just wrote (`remember`), so the first chat
after it reads no action; the hooks registered with `on_remember` (the pipeline's legacy tool
definitions and their search tokens, `app/pipeline/sources/legacy.py`) run then too, in the
import's worker thread. An entry put for a write that is then rolled back is harmless: its
stamps never appear in the store, so no load ever matches it.

Entries are detached ORM objects that no session holds (copies, for the import's): shared by
concurrent runs, read, never changed — the agent cache's rule for what it serves.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from app.connectors.models import Connector, ConnectorAction
from app.connectors.repository import ConnectorActionRepository

logger = logging.getLogger(__name__)

Stamp = tuple[uuid.UUID, datetime]
"""One action as the store has it now: its id and its last write's time."""
Hook = Callable[[Connector], object]
"""Called with a connector an import just wrote (its return value is ignored)."""

CONNECTORS = 256
"""Connectors kept (least recently used go first)."""
_COLUMNS = tuple(c.key for c in inspect(ConnectorAction).column_attrs)


def _detached(action: ConnectorAction) -> ConnectorAction:
    """A copy of a just-flushed action that belongs to no session (every column loaded)."""
    copy = ConnectorAction(**{key: getattr(action, key) for key in _COLUMNS})
    make_transient_to_detached(copy)
    return copy


class ActionCatalog:
    """Each connector's actions by id, as of their stamps (see the module doc)."""

    def __init__(self, size: int = CONNECTORS) -> None:
        self._entries: OrderedDict[uuid.UUID, dict[uuid.UUID, ConnectorAction]] = OrderedDict()
        self._lock = threading.Lock()
        self._hooks: list[Hook] = []
        self.size = size
        self.loaded = 0
        """Actions read from the store so far."""
        self.served = 0
        """Actions served from memory so far."""
        self.reads: Counter[uuid.UUID] = Counter()
        """Per connector, how many times its actions were read from the store (tests)."""

    def on_remember(self, hook: Hook) -> None:
        """Call `hook(connector)` whenever an import remembers a connector (idempotent)."""
        if hook not in self._hooks:
            self._hooks.append(hook)

    def match(
        self, connector_id: uuid.UUID, stamps: Sequence[Stamp]
    ) -> list[ConnectorAction] | None:
        """The connector's actions in `stamps`' order when the entry holds exactly them."""
        with self._lock:
            entry = self._entries.get(connector_id)
            if entry is None or len(entry) != len(stamps):
                return None
            found = []
            for ident, stamp in stamps:
                action = entry.get(ident)
                if action is None or action.updated_at != stamp:
                    return None
                found.append(action)
            self._entries.move_to_end(connector_id)
        return found

    def put(self, connector_id: uuid.UUID, actions: Sequence[ConnectorAction]) -> None:
        with self._lock:
            self._entries[connector_id] = {a.id: a for a in actions}
            self._entries.move_to_end(connector_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.loaded = self.served = 0
            self.reads.clear()

    def remember(self, connector: Connector) -> None:
        """What an import just flushed (ids and stamps set), then the hooks. Runs in the
        import's worker thread; a failing hook only means the first chat builds it."""
        self.put(connector.id, [_detached(a) for a in connector.actions])
        for hook in self._hooks:
            try:
                hook(connector)
            except Exception:
                logger.exception("preparing connector %s after its import failed", connector.id)

    async def attach(self, session: AsyncSession, connectors: Sequence[Connector]) -> None:
        """Set each connector's `actions` (left unloaded by its query): from this catalog
        when the store's stamps are exactly an entry's, else read in one query and kept."""
        if not connectors:
            return
        repo = ConnectorActionRepository(session)
        stamps = await repo.stamps([c.id for c in connectors])
        missing: list[Connector] = []
        for connector in connectors:
            found = self.match(connector.id, stamps.get(connector.id, ()))
            if found is None:
                missing.append(connector)
            else:
                set_committed_value(connector, "actions", found)
                self.served += len(found)
        if not missing:
            return
        loaded = await repo.of_connectors([c.id for c in missing])
        for connector in missing:
            actions = loaded.get(connector.id, [])
            set_committed_value(connector, "actions", actions)
            self.put(connector.id, actions)  # keyed by what was read, not by `stamps`
            self.loaded += len(actions)
            self.reads[connector.id] += 1


ACTIONS = ActionCatalog()
"""The process-wide catalog (the agent cache reads through it; imports fill it)."""
