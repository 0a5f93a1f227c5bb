"""Storing a run before it starts: the run, the user's message and, for a new conversation,
the conversation, in one transaction (the session path; SQLite, rate-limited keys, a client's
history), or in one statement on Postgres when the conversation goes on (`RunStarts`).
`RunManager` mixes it in; a new conversation's run on Postgres is stored with its first event
instead (`RunManager.start`, `app/chat/pgwrite.py`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.models import Agent
from app.chat.active import history_from_rows, message_row
from app.chat.liveness import WorkerLiveness
from app.chat.pgwrite import ContinuedRun, RunStarts
from app.chat.repository import ConversationRepository, RunRepository
from app.chat.schemas import ChatRequest
from app.errors import Conflict, Invalid, NotFound
from app.llm.types import ChatMessage
from app.tenancy.limits import count_run_start
from app.tenancy.principal import Principal

FOREIGN_KEY_VIOLATION = "23503"


class SessionRunStore(WorkerLiveness):
    sessionmaker: async_sessionmaker[AsyncSession]
    starts: RunStarts | None

    async def _prepare(
        self,
        req: ChatRequest,
        principal: Principal,
        agent: Agent,
        run_id: uuid.UUID,
        history: Sequence[ChatMessage] = (),
    ) -> tuple[uuid.UUID, list[ChatMessage]]:
        """The run stored with the user's message, in an existing conversation or with a new
        one on the session path: (conversation id, history before this message)."""
        if (
            self.starts is not None
            and req.conversation_id is not None
            and self._unlimited(principal)
        ):
            # Continuing a conversation in one round trip; the session path tells apart why
            # it stored nothing (404, another agent's, 409, a run whose worker died).
            stored = await self.starts.continue_conversation(
                ContinuedRun(
                    run_id=run_id,
                    conversation_id=req.conversation_id,
                    agent_id=agent.id,
                    message=req.message,
                    api_key_id=principal.key_id,
                    user=principal.user,
                    admin=principal.admin,
                    worker_id=self.worker_id,
                )
            )
            if stored is not None:
                return req.conversation_id, history_from_rows(stored)
        async with self.sessionmaker() as session:
            try:
                conversation_id, earlier = await self._create_run(
                    session, agent, req, principal, run_id, history
                )
                await session.commit()
            except IntegrityError as exc:
                if getattr(exc.orig, "sqlstate", None) == FOREIGN_KEY_VIOLATION:
                    raise self._gone(req) from exc
                # The store allows one running run per conversation (all workers).
                raise self._busy() from exc
        return conversation_id, earlier

    def _unlimited(self, principal: Principal) -> bool:
        """No run count to keep for the key (a rate-limited one takes the session path)."""
        return principal.rate_limit_per_minute is None

    @staticmethod
    def _gone(req: ChatRequest) -> NotFound:
        """404 for the agent: unknown, not the key's, or deleted after it was read (a cached
        copy not yet dropped, or a concurrent delete)."""
        return NotFound(f"agent {str(req.agent_id)!r} not found")

    @staticmethod
    def _busy() -> Conflict:
        return Conflict(
            "a run is already in progress in this conversation; wait for it to "
            "finish or cancel it (POST /api/v1/runs/{run_id}/cancel)"
        )

    async def _create_run(
        self,
        session: AsyncSession,
        agent: Agent,
        req: ChatRequest,
        principal: Principal,
        run_id: uuid.UUID,
        sent: Sequence[ChatMessage] = (),
    ) -> tuple[uuid.UUID, list[ChatMessage]]:
        """The run and the user's message, stored together before the run starts (the
        session path: an existing conversation, a rate-limited key, SQLite, a client's
        history `sent` with the message)."""
        # First, before any row that references the key: its lock orders concurrent starts.
        # A refusal below rolls the count back with everything else.
        await count_run_start(session, principal)
        conversations = ConversationRepository(session)
        seq = 1
        if req.conversation_id is not None:
            locked = await conversations.lock(req.conversation_id)
            conversation = principal.owned(locked, "conversation", req.conversation_id)
            if conversation.agent_id != agent.id:
                raise Invalid("conversation_id: the conversation belongs to another agent")
            if await self._blocking_run(session, conversation.id):
                raise self._busy()
            rows = await conversations.messages(conversation.id)
            history = history_from_rows(rows)
            seq = rows[-1].seq + 1 if rows else 1
            conversation_id = conversation.id
        else:
            conversation_id = uuid.uuid4()
            created = await conversations.insert_for_agent(
                id=conversation_id,
                agent_id=agent.id,
                title=req.message[:80],
                api_key_id=principal.key_id,
                user=principal.user,
            )
            if not created:
                raise self._gone(req)  # deleted behind a cached copy
            history = list(sent)
        await RunRepository(session).insert(
            id=run_id,
            conversation_id=conversation_id,
            agent_id=agent.id,
            worker_id=self.worker_id,
            api_key_id=principal.key_id,
            user=principal.user,
        )
        new_rows = [message_row(m) for m in (*sent, ChatMessage.user(req.message))]
        await conversations.insert_messages(conversation_id, run_id, seq, new_rows)
        return conversation_id, history

    async def _blocking_run(self, session: AsyncSession, conversation_id: uuid.UUID) -> bool:
        """Is a run still in progress here? A run whose worker died is closed as lost
        (`run_failed {code: run_lost}`) instead of blocking the conversation."""
        run = await RunRepository(session).running_in_conversation(conversation_id)
        if run is None:
            return False
        if await self._executed_somewhere(session, run):
            return True
        await self._close_lost(session, run.id)
        return False
