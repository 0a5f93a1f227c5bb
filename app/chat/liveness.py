"""Worker liveness: each process beats in `workers`, and runs whose worker stopped beating
are closed as lost (`run_failed {code: run_lost}`) or handed to their kind's resumer (MCP
sessions). `RunManager` holds one (`RunManager.liveness`); the session run store asks it
whether a conversation's running run is still executed somewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Container
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.repository import ApprovalRepository
from app.chat.active import RESUMABLE_KINDS, lost_event
from app.chat.hub import RunHub
from app.chat.models import Run
from app.chat.repository import RunRepository, WorkerRepository
from app.config import Settings
from app.db.base import utcnow
from app.events import event_payload

logger = logging.getLogger("quiver.runs")


class WorkerLiveness:
    """This process as the owner of the runs it executes, and the judge of other workers'."""

    def __init__(
        self,
        *,
        settings: Settings,
        hub: RunHub,
        background: async_sessionmaker[AsyncSession],
        executing: Container[uuid.UUID],
        cancel_local: Callable[[uuid.UUID], None],
    ) -> None:
        """`executing`: the runs this process executes now (the run manager's, read live);
        `cancel_local`: stops one of them (a cancel request whose notification was missed)."""
        self.settings = settings
        self.hub = hub
        self.background = background
        self.worker_id = uuid.uuid4()
        """This process, as the owner of the runs it executes (see `Worker`)."""
        self._executing = executing
        self._cancel_local = cancel_local
        self._claimed: set[uuid.UUID] = set()
        self.resumable: dict[str, Callable[[Run], Awaitable[None]]] = {}
        """Run kinds another worker can take over (MCP sessions): when no live worker holds
        such a run, the sweep asks its kind's handler (which ends it once idle) instead of
        closing it as lost."""
        self._heartbeat: asyncio.Task[None] | None = None
        self._beating_since: float | None = None

    def claim(self, run_id: uuid.UUID) -> None:
        """A run stored but not executing yet, or executed outside the run manager (an MCP
        session, a delegation's child being stored): not lost while it is claimed."""
        self._claimed.add(run_id)

    def unclaim(self, run_id: uuid.UUID) -> None:
        self._claimed.discard(run_id)

    def _here(self, run_id: uuid.UUID) -> bool:
        return run_id in self._executing or run_id in self._claimed

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
            lost = [r for r in mine if not self._here(r.id)]
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
                await self.close_lost(session, run.id)
                await session.commit()
            self.hub.wake(run.id)
        if judging:
            async with self.background() as session:
                await WorkerRepository(session).forget_dead(lost_before=self._lost_before())
                await session.commit()

    async def close_lost(self, session: AsyncSession, run_id: uuid.UUID) -> bool:
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

    async def executed_somewhere(self, session: AsyncSession, run: Run) -> bool:
        """Is a live worker executing this running run?"""
        if run.worker_id == self.worker_id:
            return self._here(run.id)
        if self.settings.is_sqlite or run.worker_id is None:
            return False  # one process per SQLite store: nobody else runs it
        if not self._judging():
            return True
        return await WorkerRepository(session).alive(run.worker_id, lost_before=self._lost_before())

    async def aclose(self) -> None:
        """Stop beating; forget this worker unless a run of it is still stored as running
        (the next sweep of another worker, or of this one after a restart, closes it)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(BaseException):
                await self._heartbeat
        with contextlib.suppress(Exception):
            async with self.background() as session:
                if not await RunRepository(session).running_of_worker(self.worker_id):
                    await WorkerRepository(session).forget(self.worker_id)
                    await session.commit()
