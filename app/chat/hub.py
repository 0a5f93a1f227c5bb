"""Live fan-out of run events across subscribers, tasks and uvicorn workers.

In one process, `publish()` wakes followers directly. Across workers, each journal write
also sends `NOTIFY quiver_runs, '<run_id>'` (Postgres only); a listener connection in every
worker turns those into the same wake-ups. Followers then read new rows from the journal,
so the journal stays the single source of truth and a missed wake-up only costs latency
(followers also poll at a low rate).

The same channel carries `config`: a transaction that wrote an agent, one of the resources
agents link to, or an API key (see `app/db/changes.py`) sends it on commit, and every worker
drops its cached agents and keys. While the listener connection is down, those caches read
through to the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import asyncpg
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.repository import ChannelRepository
from app.config import Settings
from app.db import changes

CHANNEL = "quiver_runs"
CANCEL_PREFIX = "cancel:"
RELEASE_PREFIX = "release:"
"""Payload `release:<run_id>:<worker_id>`: another worker wants the MCP session that run is;
the worker named, which holds it, lets go once the requests it admitted are done
(`app/mcpserver/sessions.py`)."""
CONFIG = "config"
"""Payload: stored configuration changed (cached agents and API keys are stale)."""
logger = logging.getLogger("quiver.hub")


def _announce_config(conn: Connection) -> None:
    """`NOTIFY quiver_runs, 'config'` with the writing transaction (Postgres only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": CHANNEL, "p": CONFIG})


changes.announcer = _announce_config


class RunHub:
    def __init__(self, *, notify: bool = False) -> None:
        self.notify = notify
        """Send `NOTIFY` with journal writes and cancels (Postgres: other workers listen)."""
        self._waiters: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)
        self._listener: asyncpg.Connection | None = None
        self.on_cancel: Callable[[uuid.UUID], None] | None = None
        self.on_release: Callable[[uuid.UUID, uuid.UUID], None] | None = None

    async def announce(self, session: AsyncSession, run_id: uuid.UUID) -> None:
        """Tell other workers' followers that the run has new journal rows (on commit)."""
        if self.notify:
            await ChannelRepository(session).notify(CHANNEL, str(run_id))

    async def announce_cancel(self, session: AsyncSession, run_id: uuid.UUID) -> None:
        """Tell the worker executing the run to stop it (on commit)."""
        if self.notify:
            await ChannelRepository(session).notify(CHANNEL, f"{CANCEL_PREFIX}{run_id}")

    def wake(self, run_id: uuid.UUID) -> None:
        for event in self._waiters.get(run_id, ()):
            event.set()

    def waiter(self, run_id: uuid.UUID) -> asyncio.Event:
        event = asyncio.Event()
        self._waiters[run_id].add(event)
        return event

    def drop(self, run_id: uuid.UUID, event: asyncio.Event) -> None:
        waiters = self._waiters.get(run_id)
        if waiters is not None:
            waiters.discard(event)
            if not waiters:
                del self._waiters[run_id]

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            if payload == CONFIG:
                changes.bump()
                return
            if payload.startswith(CANCEL_PREFIX):
                if self.on_cancel is not None:
                    self.on_cancel(uuid.UUID(payload.removeprefix(CANCEL_PREFIX)))
                return
            if payload.startswith(RELEASE_PREFIX):
                run_id, _, holder = payload.removeprefix(RELEASE_PREFIX).partition(":")
                if self.on_release is not None:
                    self.on_release(uuid.UUID(run_id), uuid.UUID(holder))
                return
            self.wake(uuid.UUID(payload))
        except ValueError:
            logger.warning("ignoring malformed notification on %s", CHANNEL)

    async def start(self, settings: Settings) -> None:
        """Listen for other workers' writes (Postgres only; SQLite is single-process)."""
        if settings.is_sqlite:
            return
        dsn = settings.direct_dsn  # LISTEN holds its connection: never a transaction pooler
        changes.set_deaf(self, True)  # until the listener is in place
        try:
            self._listener = await asyncpg.connect(dsn)
            await self._listener.add_listener(CHANNEL, self._on_notify)
            self._listener.add_termination_listener(self._on_lost)
        except (OSError, asyncpg.PostgresError) as exc:
            logger.warning("run fan-out across workers disabled: %s", type(exc).__name__)
            self._listener = None
            return
        changes.set_deaf(self, False)

    def _on_lost(self, _conn: Any) -> None:
        changes.set_deaf(self, True)  # the heartbeat listens again (`ensure_listening`)

    async def ensure_listening(self, settings: Settings) -> None:
        """Listen again if the connection was lost (the database restarted)."""
        if settings.is_sqlite:
            return
        if self._listener is not None and not self._listener.is_closed():
            return
        await self.aclose()
        await self.start(settings)

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.remove_termination_listener(self._on_lost)
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None
        changes.set_deaf(self, False)
