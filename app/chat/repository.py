"""The journal and conversation store: runs, their ordered events, and messages."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update

from app.chat.models import Conversation, Message, Run, RunEventRecord
from app.db.base import utcnow
from app.kit.repository import RepositoryBase

RUNNING = "running"


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; everything is stored in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class RunRepository(RepositoryBase[Run]):
    model = Run

    async def running_in_conversation(self, conversation_id: uuid.UUID) -> Run | None:
        stmt = select(Run).where(Run.conversation_id == conversation_id, Run.status == RUNNING)
        return (await self.session.execute(stmt.limit(1))).scalar_one_or_none()

    async def events_after(self, run_id: uuid.UUID, seq: int) -> list[RunEventRecord]:
        stmt = (
            select(RunEventRecord)
            .where(RunEventRecord.run_id == run_id, RunEventRecord.seq > seq)
            .order_by(RunEventRecord.seq)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def append_event(
        self, run_id: uuid.UUID, seq: int, kind: str, data: dict[str, Any]
    ) -> None:
        self.session.add(RunEventRecord(run_id=run_id, seq=seq, kind=kind, data=data))
        await self.session.flush()

    async def finish(
        self,
        run_id: uuid.UUID,
        *,
        status: str,
        iterations: int,
        usage: dict[str, Any],
        error: dict[str, Any] | None = None,
    ) -> None:
        await self.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                status=status,
                iterations=iterations,
                usage=usage,
                error=error,
                finished_at=utcnow(),
                updated_at=utcnow(),
            )
        )

    async def last_activity(self, run: Run) -> datetime:
        """When the run last journaled an event (its start when it has none)."""
        stmt = select(func.max(RunEventRecord.created_at)).where(RunEventRecord.run_id == run.id)
        latest = await self.session.scalar(stmt)
        return _aware(latest or run.created_at)

    async def request_cancel(self, run_id: uuid.UUID) -> None:
        await self.session.execute(
            update(Run).where(Run.id == run_id).values(cancel_requested=True)
        )

    async def runs_of(self, conversation_id: uuid.UUID) -> list[Run]:
        stmt = select(Run).where(Run.conversation_id == conversation_id).order_by(Run.created_at)
        return list((await self.session.execute(stmt)).scalars().all())


class ConversationRepository(RepositoryBase[Conversation]):
    model = Conversation

    async def messages(self, conversation_id: uuid.UUID) -> list[Message]:
        stmt = (
            select(Message).where(Message.conversation_id == conversation_id).order_by(Message.seq)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def next_message_seq(self, conversation_id: uuid.UUID) -> int:
        stmt = select(func.max(Message.seq)).where(Message.conversation_id == conversation_id)
        current = await self.session.scalar(stmt)
        return int(current or 0) + 1

    async def add_messages(
        self, conversation_id: uuid.UUID, run_id: uuid.UUID, messages: Sequence[dict[str, Any]]
    ) -> None:
        seq = await self.next_message_seq(conversation_id)
        for offset, msg in enumerate(messages):
            self.session.add(
                Message(conversation_id=conversation_id, run_id=run_id, seq=seq + offset, **msg)
            )
        await self.session.flush()
