"""Worker liveness: each process beats in `workers`, and runs whose worker stopped beating
are closed as lost (`run_failed {code: run_lost}`) or handed to their kind's resumer (MCP
sessions). `RunManager` mixes it in; the state it reads is declared here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.repository import ApprovalRepository
from app.chat.active import ActiveRun, lost_event
from app.chat.hub import RunHub
from app.chat.models import Run
from app.chat.repository import RunRepository, WorkerRepository
from app.config import Settings
from app.db.base import utcnow
from app.events import event_payload

logger = logging.getLogger("quiver.runs")

RESUMABLE_KINDS = frozenset({"mcp_session"})
"""Runs another worker can take over (sessions of the MCP endpoint): never closed as lost."""


class WorkerLiveness:
    settings: Settings
    hub: RunHub
    background: async_sessionmaker[AsyncSession]
    active: dict[uuid.UUID, ActiveRun]
    worker_id: uuid.UUID
    _claimed: set[uuid.UUID]
    resumable: dict[str, Callable[[Run], Awaitable[None]]]
    _heartbeat: asyncio.Task[None] | None
    _beating_since: float | None

    def _cancel_local(self, run_id: uuid.UUID) -> None:
        raise NotImplementedError

    def claim(self, run_id: uuid.UUID) -> None:
        """A run executed outside `start()` (an MCP session): not lost while it is claimed."""
        self._claimed.add(run_id)

    def unclaim(self, run_id: uuid.UUID) -> None:
        self._claimed.discard(run_id)

    async def open(self) -> None:
        """Register this worker, close runs lost by dead ones, then keep beating."""
        try:
            await self.beat_and_sweep()
        except Exception:  # storage down at start-up: the heartbeat loop retries
            logger.exception("worker heartbeat failed")
        self._heartbeat = asyncio.create_task(self._beat_forever(), name="worker-heartbeat")

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(self.settings.worker_heartbeat_s)
            try:
                await self.beat_and_sweep()
            except Exception:
                logger.exception("worker heartbeat failed")

    def _lost_before(self) -> datetime:
        return utcnow() - timedelta(seconds=self.settings.worker_lost_after_s)

    def _judging(self) -> bool:
        """May this worker declare others dead? Only after beating without a break for
        `worker_lost_after_s`: after a storage outage every heartbeat is old, and live
        workers need that long to beat again."""
        if self.settings.is_sqlite:
            return True
        since = self._beating_since
        return since is not None and time.monotonic() - since >= self.settings.worker_lost_after_s

    async def beat_and_sweep(self) -> None:
        try:
            async with self.background() as session:
                await WorkerRepository(session).beat(
                    self.worker_id, host=socket.gethostname(), pid=os.getpid()
                )
                await session.commit()
        except Exception:
            self._beating_since = None
            raise
        if self._beating_since is None:
            self._beating_since = time.monotonic()
        await self.hub.ensure_listening(self.settings)
        judging = self._judging()
        async with self.background() as session:
            repo = RunRepository(session)
            mine = await repo.running_of_worker(self.worker_id)
            lost = [r for r in mine if r.id not in self.active and r.id not in self._claimed]
            if judging:
                lost += await repo.orphaned(
                    me=self.worker_id,
                    lost_before=self._lost_before(),
                    only_worker_alive=self.settings.is_sqlite,
                )
        for run in mine:
            if run.cancel_requested:  # in case the cancel notification was missed
                self._cancel_local(run.id)
        for run in lost:
            if run.kind in RESUMABLE_KINDS:
                resumable = self.resumable.get(run.kind)
                try:  # not registered yet (starting up): left for a later sweep
                    if resumable is not None:
                        await resumable(run)
                except Exception:
                    logger.exception("could not sweep the %s run %s", run.kind, run.id)
                continue
            async with self.background() as session:
                await self._close_lost(session, run.id)
                await session.commit()
            self.hub.wake(run.id)
        if judging:
            async with self.background() as session:
                await WorkerRepository(session).forget_dead(lost_before=self._lost_before())
                await session.commit()

    async def _close_lost(self, session: AsyncSession, run_id: uuid.UUID) -> bool:
        """Journal `run_failed {code: run_lost}` and end the run (in the caller's transaction)."""
        event = lost_event()
        seq = await RunRepository(session).close_lost(run_id, event.kind, event_payload(event))
        if seq is None:
            return False
        # A call that waited for a person died with its worker: it can no longer run.
        await ApprovalRepository(session).close_pending(run_id, "cancelled")
        logger.warning("run %s was lost with its worker; closed as run_lost", run_id)
        await self.hub.announce(session, run_id)
        return True

    async def _executed_somewhere(self, session: AsyncSession, run: Run) -> bool:
        """Is a live worker executing this running run?"""
        if run.worker_id == self.worker_id:
            return run.id in self.active or run.id in self._claimed
        if self.settings.is_sqlite or run.worker_id is None:
            return False  # one process per SQLite store: nobody else runs it
        if not self._judging():
            return True
        return await WorkerRepository(session).alive(run.worker_id, lost_before=self._lost_before())
