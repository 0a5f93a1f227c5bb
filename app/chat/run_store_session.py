"""`SessionRunStore`: a run, its user's message and, for a new conversation, the conversation,
stored in one transaction on a SQLAlchemy session before the run executes (the general
implementation of `RunStartStore`, see `run_store.py`)."""

from __future__ import annotations

import uuid

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.chat.active import history_from_rows, message_row
from app.chat.liveness import WorkerLiveness
from app.chat.repository import ConversationRepository, RunRepository
from app.chat.run_store import Opened, RunStart, agent_gone, run_in_progress
from app.errors import Invalid
from app.llm.types import ChatMessage
from app.tenancy.limits import count_run_start

FOREIGN_KEY_VIOLATION = "23503"


class SessionRunStore:
    def __init__(
        self, sessionmaker: async_sessionmaker[AsyncSession], liveness: WorkerLiveness
    ) -> None:
        """`liveness`: the worker the runs belong to, which also tells whether a running run
        that blocks a conversation is still executed somewhere."""
        self.sessionmaker = sessionmaker
        self.liveness = liveness

    async def open(self, start: RunStart) -> Opened:
        async with self.sessionmaker() as session:
            try:
                opened = await self._create_run(session, start)
                await session.commit()
            except IntegrityError as exc:
                if getattr(exc.orig, "sqlstate", None) == FOREIGN_KEY_VIOLATION:
                    raise agent_gone(start.agent_id) from exc
                # The store allows one running run per conversation (all workers).
                raise run_in_progress() from exc
        return opened

    async def aclose(self) -> None:
        """Nothing of its own to close (sessions come from the app's sessionmaker)."""

    async def _create_run(self, session: AsyncSession, start: RunStart) -> Opened:
        principal = start.principal
        # First, before any row that references the key: its lock orders concurrent starts.
        # A refusal below rolls the count back with everything else.
        await count_run_start(session, principal)
        conversations = ConversationRepository(session)
        seq = 1
        if start.conversation_id is not None:
            locked = await conversations.lock(start.conversation_id)
            conversation = principal.owned(locked, "conversation", start.conversation_id)
            if conversation.agent_id != start.agent_id:
                raise Invalid("conversation_id: the conversation belongs to another agent")
            if await self._blocking_run(session, conversation.id):
                raise run_in_progress()
            rows = await conversations.messages(conversation.id)
            history = history_from_rows(rows)
            seq = rows[-1].seq + 1 if rows else 1
            conversation_id = conversation.id
        else:
            conversation_id = uuid.uuid4()
            created = await conversations.insert_for_agent(
                id=conversation_id,
                agent_id=start.agent_id,
                title=start.message[:80],
                api_key_id=principal.key_id,
                user=principal.user,
            )
            if not created:
                raise agent_gone(start.agent_id)  # deleted behind a cached copy
            history = list(start.history)
        await RunRepository(session).insert(
            id=start.run_id,
            conversation_id=conversation_id,
            agent_id=start.agent_id,
            worker_id=self.liveness.worker_id,
            api_key_id=principal.key_id,
            user=principal.user,
        )
        sent = (*start.history, ChatMessage.user(start.message))
        await conversations.insert_messages(
            conversation_id, start.run_id, seq, [message_row(m) for m in sent]
        )
        return Opened(conversation_id=conversation_id, history=history)

    async def _blocking_run(self, session: AsyncSession, conversation_id: uuid.UUID) -> bool:
        """Is a run still in progress here? A run whose worker died is closed as lost
        (`run_failed {code: run_lost}`) instead of blocking the conversation."""
        run = await RunRepository(session).running_in_conversation(conversation_id)
        if run is None:
            return False
        if await self.liveness.executed_somewhere(session, run):
            return True
        await self.liveness.close_lost(session, run.id)
        return False
