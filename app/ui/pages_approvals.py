"""The approvals inbox: what waits for a person across every run the viewer may see."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.approvals.schemas import ApprovalDecide, ApprovalRead
from app.approvals.service import decide, list_approvals
from app.chat.deps import RunHubDep
from app.chat.models import Run
from app.chat.repository import RunRepository
from app.db.session import SessionDep
from app.errors import QuiverError
from app.kit.pagination import PageParams
from app.kit.state import SettingsDep
from app.ui.deps import PAGE, ConsoleDep, CsrfField, Offset, done, failed
from app.ui.render import page

router = APIRouter(prefix="/ui", include_in_schema=False)
INBOX = "/ui/approvals"
STATUSES = ("pending", "approved", "denied", "expired", "cancelled")


@dataclass(frozen=True)
class InboxRow:
    """One approval with the run and agent it belongs to (a delegate's run names its parent)."""

    approval: ApprovalRead
    run: Run | None
    agent: Agent | None


async def inbox_rows(session: AsyncSession, approvals: list[ApprovalRead]) -> list[InboxRow]:
    runs = {r.id: r for r in await RunRepository(session).get_many([a.run_id for a in approvals])}
    agent_ids = list({r.agent_id for r in runs.values()})
    agents = {a.id: a for a in await AgentRepository(session).get_many(agent_ids)}
    rows = []
    for approval in approvals:
        run = runs.get(approval.run_id)
        rows.append(InboxRow(approval, run, agents.get(run.agent_id) if run else None))
    return rows


@router.get("/approvals", response_class=HTMLResponse)
async def approvals(
    request: Request,
    session: SessionDep,
    console: ConsoleDep,
    status: Annotated[str, Query(max_length=16)] = "pending",
    offset: Offset = 0,
) -> Response:
    chosen = status if status in STATUSES else None
    listed = await list_approvals(
        session, console.principal, PageParams(limit=PAGE, offset=offset), status=chosen
    )
    return page(
        request,
        "approvals.html",
        console,
        rows=await inbox_rows(session, listed.items),
        total=listed.total,
        status=chosen or "",
        statuses=STATUSES,
        offset=offset,
        size=PAGE,
    )


@router.post("/approvals/{approval_id}")
async def decide_from_inbox(
    approval_id: uuid.UUID,
    session: SessionDep,
    hub: RunHubDep,
    settings: SettingsDep,
    console: ConsoleDep,
    csrf_token: CsrfField,
    run_id: Annotated[uuid.UUID, Form()],
    decision: Annotated[str, Form(max_length=16)],
    reason: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    """Approve or deny through the approval service; a 409 (decided elsewhere, expired, run
    over) comes back as a message on the inbox."""
    console.check_csrf(csrf_token)
    try:
        body = ApprovalDecide.model_validate(
            {"decision": decision, "reason": reason.strip() or None}
        )
        decided = await decide(
            session,
            hub,
            console.principal,
            run_id,
            approval_id,
            body,
            notify=not settings.is_sqlite,
        )
    except QuiverError as exc:
        return await failed(session, console, INBOX, exc.message)
    except ValueError:
        return await failed(session, console, INBOX, "decision: approve or deny")
    return done(console, INBOX, f"{decided.name}: {decided.status}")
