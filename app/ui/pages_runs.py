"""The playground, the runs and the tool-call audit."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.repository import ToolCallRepository
from app.audit.tombstones import deleted_targets
from app.chat.operator import get_run, list_runs
from app.chat.schemas import RunRead
from app.chat.service import get_conversation
from app.db.session import SessionDep
from app.kit.pagination import PageParams
from app.ui.deps import (
    PAGE,
    RUN_STATUSES,
    TOOL_KINDS,
    ConsoleDep,
    Offset,
    uuid_or_none,
)
from app.ui.picker import agent_choices, find_text, picked_ids
from app.ui.render import page
from app.ui.sessions import Console

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/playground", response_class=HTMLResponse)
async def playground(
    request: Request,
    session: SessionDep,
    console: ConsoleDep,
    run: uuid.UUID | None = None,
) -> Response:
    principal = console.principal
    run_read = await get_run(session, principal, run) if run is not None else None
    prompt = await _prompt(session, console, run_read)
    # the agent select: the run's (or ?agent=) agent, then the others found by name
    chosen = picked_ids(request, "agent")
    if run_read is not None:
        chosen = {run_read.agent_id}
    find = find_text(request, "find_agents")
    choices = await agent_choices(session, principal, find, chosen)
    return page(
        request, "playground.html", console, agent_choices=choices, run=run_read, prompt=prompt
    )


@router.get("/runs", response_class=HTMLResponse)
async def runs(
    request: Request,
    session: SessionDep,
    console: ConsoleDep,
    status: Annotated[str, Query(max_length=32)] = "",
    offset: Offset = 0,
) -> Response:
    chosen = status if status in RUN_STATUSES else None
    listed = await list_runs(
        session, console.principal, PageParams(limit=PAGE, offset=offset), status=chosen
    )
    return page(
        request,
        "runs.html",
        console,
        runs=listed,
        status=chosen or "",
        statuses=RUN_STATUSES,
        offset=offset,
        size=PAGE,
    )


@router.get("/runs/{run_id}", response_class=HTMLResponse)
async def run_detail(
    request: Request, run_id: uuid.UUID, session: SessionDep, console: ConsoleDep
) -> Response:
    run = await get_run(session, console.principal, run_id)
    prompt = await _prompt(session, console, run)
    return page(request, "run.html", console, run=run, prompt=prompt)


@router.get("/tool-calls", response_class=HTMLResponse)
async def tool_calls(
    request: Request,
    session: SessionDep,
    console: ConsoleDep,
    kind: Annotated[str, Query(max_length=16)] = "",
    name: Annotated[str, Query(max_length=128)] = "",
    ok: Annotated[str, Query(max_length=8)] = "",
    run_id: Annotated[str, Query(max_length=64)] = "",
    offset: Offset = 0,
) -> Response:
    run_uuid = uuid_or_none(run_id)
    rows, total = await ToolCallRepository(session).page(
        console.principal,
        run_id=run_uuid,
        kind=kind if kind in TOOL_KINDS else None,
        name=name.strip() or None,
        ok={"ok": True, "error": False}.get(ok),
        limit=PAGE,
        offset=offset,
    )
    filters = {"kind": kind, "name": name, "ok": ok, "run_id": run_id}
    deleted = await deleted_targets(session, rows)
    return page(
        request,
        "tool_calls.html",
        console,
        calls=rows,
        deleted=deleted,
        total=total,
        offset=offset,
        size=PAGE,
        filters=filters,
        kinds=TOOL_KINDS,
    )


async def _prompt(session: AsyncSession, console: Console, run: RunRead | None) -> str | None:
    """The user message that started `run` (the journal has the rest)."""
    if run is None:
        return None
    conversation = await get_conversation(session, run.conversation_id, console.principal)
    for message in conversation.messages:
        if message.run_id == run.id and message.role == "user":
            return message.content
    return None
