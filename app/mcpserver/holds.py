"""Which requests this worker admitted to each MCP session, and the sessions it lets go of.

On Postgres a worker holds a session under a lease (`runs.lease_until`, see `store.py`).
Another worker that wants the session asks the holder, by name, to let go
(`RunHub.on_release`); the holder then admits no new request for it, serves the requests it
had admitted — each counted from its admission to the end of its response — and releases the
lease (`McpSessions._let_go`). `McpSessions` keeps the sessions' states; this keeps the
counts and the events they wait on.
"""

from __future__ import annotations

import asyncio
import uuid

from app.errors import Unavailable

BUSY_RETRY_S = 1


class SessionBusy(Unavailable):
    """Another worker holds the session and did not let go of it in time (a call in flight
    there, or the request to let go was not heard): the client tries again."""

    def __init__(self) -> None:
        super().__init__("another worker is serving this MCP session; try again")

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(BUSY_RETRY_S)}


class Holds:
    def __init__(self) -> None:
        self.serving: dict[uuid.UUID, int] = {}
        """By run: the requests admitted here that are not over (`enter`, `leave`)."""
        self._idle: dict[uuid.UUID, asyncio.Event] = {}
        self._letting_go: dict[uuid.UUID, asyncio.Event] = {}
        """Sessions another worker asked for, until this one released them."""
        self._releasing: set[uuid.UUID] = set()
        """Sessions being released now: no request admitted here is left on them."""

    def enter(self, run_id: uuid.UUID) -> None:
        self.serving[run_id] = self.serving.get(run_id, 0) + 1

    def leave(self, run_id: uuid.UUID) -> None:
        left = self.serving.get(run_id, 0) - 1
        if left > 0:
            self.serving[run_id] = left
            return
        self.serving.pop(run_id, None)
        idle = self._idle.pop(run_id, None)
        if idle is not None:
            idle.set()

    def letting_go(self, run_id: uuid.UUID) -> asyncio.Event | None:
        """Set once the session asked for is released (None: not asked for)."""
        return self._letting_go.get(run_id)

    def releasing(self, run_id: uuid.UUID) -> bool:
        return run_id in self._releasing

    def ask(self, run_id: uuid.UUID) -> bool:
        """Another worker asked for the session: False if it was already being let go of."""
        if run_id in self._letting_go:
            return False
        self._letting_go[run_id] = asyncio.Event()
        return True

    async def until_idle(self, run_id: uuid.UUID) -> None:
        """Wait for the requests admitted here to be over; the release begins."""
        if self.serving.get(run_id):
            await self._idle.setdefault(run_id, asyncio.Event()).wait()
        self._releasing.add(run_id)

    def released(self, run_id: uuid.UUID) -> None:
        self._releasing.discard(run_id)
        done = self._letting_go.pop(run_id, None)
        if done is not None:
            done.set()
