"""`StoredApprovalGate`: requests are rows; any worker's route decides; the waiter wakes.

The decision route updates the row (pending → approved/denied, once) and sends
`NOTIFY quiver_runs, '<approval id>'` (Postgres), which the run hub of every worker turns
into a wake-up of the waiting call; the waiter also re-reads the row every `poll_s`, so a
lost notification only costs latency. At the deadline the waiter expires the row itself
(again only if still pending: a decision that landed first wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.approvals.gate import ApprovalRequest, Decision, Opened
from app.approvals.models import Approval
from app.approvals.notify import ApprovalNotice
from app.approvals.repository import ApprovalRepository
from app.chat.hub import RunHub
from app.db.base import utcnow


class StoredApprovalGate:
    def __init__(
        self,
        *,
        sessionmaker: async_sessionmaker[AsyncSession],
        hub: RunHub,
        run_id: uuid.UUID,
        api_key_id: uuid.UUID | None,
        user: str | None,
        cancel: asyncio.Event,
        poll_s: float = 1.0,
        notify: Callable[[ApprovalNotice], None] | None = None,
        agent: tuple[uuid.UUID, str] | None = None,
    ) -> None:
        """`notify`: told of each stored request (the webhook's queue; it never waits), with
        the run's `agent` (id, name)."""
        self._sessionmaker = sessionmaker
        self._hub = hub
        self._run_id = run_id
        self._api_key_id = api_key_id
        self._user = user
        self._cancel = cancel
        self._poll_s = poll_s
        self._notify = notify
        self._agent = agent

    async def request(
        self, request: ApprovalRequest, on_open: Callable[[Opened], None]
    ) -> Decision:
        approval_id = uuid.uuid4()
        expires_at = utcnow() + timedelta(seconds=request.timeout_s)
        # Registered before the row exists: a decision right after `on_open` is not missed.
        woken = self._hub.waiter(approval_id)
        try:
            async with self._sessionmaker() as session:
                session.add(
                    Approval(
                        id=approval_id,
                        run_id=self._run_id,
                        call_id=request.call_id,
                        name=request.name,
                        target=request.target,
                        arguments=request.arguments,
                        reason=request.reason,
                        status="pending",
                        expires_at=expires_at,
                        api_key_id=self._api_key_id,
                        user=self._user,
                    )
                )
                await session.commit()
            on_open(Opened(approval_id=str(approval_id), expires_at=expires_at))
            self._announce(approval_id, request, expires_at)
            return await self._wait(approval_id, woken, request.timeout_s)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._close(approval_id, "cancelled"))
            raise
        finally:
            self._hub.drop(approval_id, woken)

    def _announce(
        self, approval_id: uuid.UUID, request: ApprovalRequest, expires_at: datetime
    ) -> None:
        if self._notify is None or self._agent is None:
            return
        self._notify(
            ApprovalNotice(
                approval_id=approval_id,
                run_id=self._run_id,
                agent_id=self._agent[0],
                agent=self._agent[1],
                tool=request.name,
                target=request.target,
                arguments=request.arguments,
                reason=request.reason,
                expires_at=expires_at,
                user=self._user,
            )
        )

    async def _wait(
        self, approval_id: uuid.UUID, woken: asyncio.Event, timeout_s: float
    ) -> Decision:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            woken.clear()  # before reading: a wake-up after the read is not lost
            decision = await self._read(approval_id)
            if decision is not None:
                return decision
            if self._cancel.is_set():
                if await self._close(approval_id, "cancelled"):
                    return Decision(outcome="cancelled")
                continue  # decided just before: that decision stands
            remaining = deadline - loop.time()
            if remaining <= 0:
                if await self._close(approval_id, "expired"):
                    return Decision(outcome="timeout")
                continue
            cancelled = asyncio.ensure_future(self._cancel.wait())
            wake = asyncio.ensure_future(woken.wait())
            try:
                await asyncio.wait(
                    {cancelled, wake},
                    timeout=min(remaining, self._poll_s),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                cancelled.cancel()
                wake.cancel()

    async def _read(self, approval_id: uuid.UUID) -> Decision | None:
        async with self._sessionmaker() as session:
            row = await ApprovalRepository(session).get(approval_id)
        if row is None or row.status == "pending":
            return None
        if row.status == "approved":
            return Decision(outcome="approve", by=row.decided_by, reason=row.decision_reason)
        if row.status == "denied":
            return Decision(outcome="deny", by=row.decided_by, reason=row.decision_reason)
        if row.status == "expired":
            return Decision(outcome="timeout")
        return Decision(outcome="cancelled")

    async def _close(self, approval_id: uuid.UUID, status: str) -> bool:
        async with self._sessionmaker() as session:
            closed = await ApprovalRepository(session).settle(approval_id, status)
            await session.commit()
        return closed
