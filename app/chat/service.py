"""Reading a conversation back: its messages (with tool calls and results) and runs."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.chat.operator import agent_refs
from app.chat.repository import ConversationRepository, RunRepository
from app.chat.schemas import ConversationRead, MessageRead, RunSummary
from app.tenancy.principal import Principal


async def get_conversation(
    session: AsyncSession, conversation_id: uuid.UUID, principal: Principal
) -> ConversationRead:
    conversation = principal.owned(
        await ConversationRepository(session).get(conversation_id), "conversation", conversation_id
    )
    messages = await ConversationRepository(session).messages(conversation_id)
    runs = await RunRepository(session).runs_of(conversation_id)
    agents = await agent_refs(session, [conversation.agent_id])
    return ConversationRead(
        id=conversation.id,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
        agent_id=conversation.agent_id,
        agent=agents[conversation.agent_id],
        title=conversation.title,
        api_key_id=conversation.api_key_id,
        user=conversation.user,
        messages=[MessageRead.model_validate(m) for m in messages],
        runs=[RunSummary.model_validate(r) for r in runs],
    )
