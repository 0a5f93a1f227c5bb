"""The agents a key may use as models, and a completion as one run of `RunManager`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator

from fastapi.responses import JSONResponse, StreamingResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.repository import AgentRepository
from app.chat.active import ActiveRun, Published
from app.chat.router import SSE_HEADERS
from app.chat.runner import RunManager
from app.chat.schemas import ChatRequest
from app.chat.sse import LiveStreamResponse
from app.chat.streams import live_events
from app.errors import NotFound
from app.openai_api.answer import Meta, collect, stream_chunks
from app.openai_api.messages import run_request
from app.openai_api.schemas import ChatCompletionRequest, ModelCard, ModelList
from app.tenancy.principal import Principal


def model_not_found(name: str) -> NotFound:
    return NotFound(
        f"The model {name!r} does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )


async def list_models(session: AsyncSession, principal: Principal) -> ModelList:
    """Every agent the key may use (`agent_ids`; all for a key without the restriction)."""
    ids = None if principal.agent_ids is None else [uuid.UUID(i) for i in principal.agent_ids]
    rows = await AgentRepository(session).listing(ids)
    return ModelList(
        data=[ModelCard(id=name, created=int(created.timestamp())) for _, name, created in rows]
    )


async def get_model(session: AsyncSession, principal: Principal, name: str) -> ModelCard:
    """One agent as a model (`GET /v1/models/{model}`)."""
    found = await AgentRepository(session).id_named(name)
    if found is None or not principal.may_use(found):
        raise model_not_found(name)
    rows = await AgentRepository(session).listing([found])
    return ModelCard(id=name, created=int(rows[0][2].timestamp()))


async def agent_id(session: AsyncSession, principal: Principal, name: str) -> uuid.UUID:
    """The agent called `name`, when the key may use it; else OpenAI's `model_not_found`."""
    found = await AgentRepository(session).id_named(name)
    if found is None or not principal.may_use(found):
        raise model_not_found(name)
    return found


async def complete(
    runs: RunManager,
    principal: Principal,
    body: ChatCompletionRequest,
    agent: uuid.UUID,
    *,
    ping_s: float,
) -> StreamingResponse | JSONResponse:
    """Start the run (journaled, audited, rate-limited and approval-gated like any) and answer
    with its stream or, once it ended, its completion. `X-Run-Id` names the run for replay."""
    asked = run_request(body)
    request = ChatRequest(agent_id=agent, message=asked.message, user=body.user)
    try:
        active, queue = await runs.start(request, principal, history=asked.history)
    except NotFound as exc:  # deleted between the lookup and the start
        raise model_not_found(body.model) from exc
    meta = Meta(
        completion_id=f"chatcmpl-{active.run_id.hex}", created=int(time.time()), model=body.model
    )
    headers = {"X-Run-Id": str(active.run_id), "X-Conversation-Id": str(active.conversation_id)}
    if body.stream:
        chunks = _stopping(active, queue, meta, include_usage=body.include_usage, ping_s=ping_s)
        return LiveStreamResponse(
            chunks, media_type="text/event-stream", headers={**SSE_HEADERS, **headers}
        )
    events = live_events(active, queue, ping_s=ping_s)
    try:
        outcome = await collect(events, meta)
    finally:
        await events.aclose()
    return JSONResponse(outcome.body, outcome.status, headers=headers)


async def _stopping(
    active: ActiveRun,
    queue: asyncio.Queue[Published],
    meta: Meta,
    *,
    include_usage: bool,
    ping_s: float,
) -> AsyncIterator[bytes]:
    """The stream's chunks; a client that goes away before the end stops the run (as closing
    an OpenAI stream stops generation: a UI's stop button). The journal keeps what happened."""
    events = live_events(active, queue, ping_s=ping_s)
    ended = False
    try:
        async for piece in stream_chunks(events, meta, include_usage=include_usage):
            yield piece
        ended = True
    finally:
        if not ended:  # first: the close below may be interrupted
            active.cancel.set()
        await events.aclose()
