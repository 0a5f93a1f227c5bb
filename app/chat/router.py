from __future__ import annotations

import asyncio
import re
import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse
from fastapi.routing import APIRoute

from app.chat.active import ActiveRun, Published
from app.chat.deps import RunHubDep, RunManagerDep
from app.chat.schemas import CancelResult, ChatRequest, ConversationRead
from app.chat.service import get_conversation
from app.chat.sse import LiveStreamResponse
from app.chat.streams import ensure_run, live_stream, replay_stream
from app.config import Settings
from app.db.session import SessionDep, SessionmakerDep
from app.errors import Invalid
from app.kit.state import SettingsDep
from app.tenancy.principal import PrincipalDep


async def _release_auth_connection(session: SessionDep) -> None:
    """End the console session lookup's transaction so its pooled connection goes back now.

    Runs after the router-level auth dependency, which shares the request's session only for
    the console's session check (a bearer key is looked up without it). Without it every chat
    request keeps one connection for the whole handler while the run opens its own session:
    at pool-size concurrent requests they all wait on each other until the pool times out
    (found by `bench.load`: 50 concurrent runs, all HTTP 500 after 30 s).
    """
    if session.in_transaction():  # a cached key: the session never started one
        await session.commit()


MAX_SEQ = 2**31 - 1
"""Event sequence numbers are 32-bit integers in the journal."""
_SEQ = re.compile(r"[0-9]{1,10}")


def parse_last_event_id(value: str) -> int:
    """A `Last-Event-ID` header: ASCII digits only (not `²`), within the seq range."""
    text = value.strip()
    if not _SEQ.fullmatch(text) or int(text) > MAX_SEQ:
        raise Invalid(f"Last-Event-ID must be an event sequence number from 0 to {MAX_SEQ}")
    return int(text)


router = APIRouter(tags=["chat"], dependencies=[Depends(_release_auth_connection)])
CHAT_PATH = "/chat"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@router.post(
    CHAT_PATH,
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 404: {}, 409: {}, 429: {}, 503: {}},
)
async def chat(
    body: ChatRequest, runs: RunManagerDep, settings: SettingsDep, principal: PrincipalDep
) -> StreamingResponse:
    """Start a run and stream its events (SSE). Disconnecting does not stop the run.

    The conversation and run belong to the calling key and to `user` (or `X-Quiver-User`);
    a key's `rate_limit_per_minute` answers 429 with `Retry-After` when exceeded.
    """
    active, queue = await runs.start(body, principal.with_user(body.user))
    return run_stream(active, queue, settings)


def chat_route() -> APIRoute:
    """The `POST /chat` route (what routing puts in `scope["route"]`)."""
    return next(r for r in router.routes if isinstance(r, APIRoute) and r.endpoint is chat)


def run_stream(
    active: ActiveRun, queue: asyncio.Queue[Published], settings: Settings
) -> StreamingResponse:
    """The response of `POST /chat`: the started run's live SSE stream."""
    headers = {
        **SSE_HEADERS,
        "X-Run-Id": str(active.run_id),
        "X-Conversation-Id": str(active.conversation_id),
    }
    return LiveStreamResponse(
        live_stream(active, queue, ping_s=settings.sse_ping_s),
        media_type="text/event-stream",
        headers=headers,
    )


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 404: {}},
)
async def run_events(
    run_id: uuid.UUID,
    sessionmaker: SessionmakerDep,
    hub: RunHubDep,
    settings: SettingsDep,
    principal: PrincipalDep,
    last_event_id: Annotated[str | None, Header()] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQ, description="Alternative to Last-Event-ID")
    ] = None,
) -> StreamingResponse:
    """Replay a run's journal after `Last-Event-ID`, then follow it live until it ends."""
    start = after or 0
    if last_event_id:
        start = parse_last_event_id(last_event_id)
    await ensure_run(sessionmaker, run_id, principal)
    return StreamingResponse(
        replay_stream(
            sessionmaker,
            hub,
            run_id,
            after=start,
            ping_s=settings.sse_ping_s,
        ),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


@router.post("/runs/{run_id}/cancel", response_model=CancelResult, responses={404: {}})
async def cancel_run(
    run_id: uuid.UUID, runs: RunManagerDep, principal: PrincipalDep
) -> CancelResult:
    """Ask a run to stop; it ends with `run_finished {status: cancelled}`."""
    run = await runs.cancel(run_id, principal)
    return CancelResult(run_id=run.id, status=run.status, cancel_requested=run.cancel_requested)


@router.get(
    "/conversations/{conversation_id}", response_model=ConversationRead, responses={404: {}}
)
async def conversation(
    conversation_id: uuid.UUID, session: SessionDep, principal: PrincipalDep
) -> ConversationRead:
    """A conversation with its messages (incl. tool calls and results) and runs."""
    return await get_conversation(session, conversation_id, principal)
