"""`GET /tool-calls`: the audit of every tool call; admin sees all, a chat key its own."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from app.audit.repository import ToolCallRepository
from app.audit.schemas import ToolCallRead
from app.audit.tombstones import deleted_targets
from app.db.session import SessionDep
from app.kit.pagination import PageDep
from app.kit.schemas import Page
from app.tenancy.principal import PrincipalDep

router = APIRouter(tags=["runs"])
Kind = Literal["connector", "database", "mcp", "skill", "knowledge", "agent", "builtin"]


@router.get("/tool-calls", response_model=Page[ToolCallRead])
async def tool_calls(
    session: SessionDep,
    principal: PrincipalDep,
    page: PageDep,
    run_id: uuid.UUID | None = None,
    kind: Kind | None = None,
    name: Annotated[str | None, Query(max_length=128)] = None,
    ok: bool | None = None,
) -> Page[ToolCallRead]:
    """Tool calls of every kind, newest first: redacted arguments, ok/error, latency, ids."""
    rows, total = await ToolCallRepository(session).page(
        principal,
        run_id=run_id,
        kind=kind,
        name=name,
        ok=ok,
        limit=page.limit,
        offset=page.offset,
    )
    deleted = await deleted_targets(session, rows)
    items = [
        ToolCallRead.model_validate(
            {
                **{c: getattr(row, c) for c in _COLUMNS},
                "status": "ok" if row.ok else "error",
                "target_deleted": row.id in deleted,
            }
        )
        for row in rows
    ]
    return Page(items=items, total=total, limit=page.limit, offset=page.offset)


_COLUMNS = tuple(
    name for name in ToolCallRead.model_fields if name not in ("status", "target_deleted")
)
