"""The keys page (`/ui/keys`): API keys (list, create shown once, revoke) and the OAuth tokens
issued on consent beside them (client, agent, expiry; revoke).

An admin sees and manages every key and every OAuth token; a chat key sees the OAuth tokens it
consented to, and may revoke them.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.service import agent_service
from app.apikeys.schemas import ApiKeyCreate, ApiKeyRead
from app.apikeys.service import api_key_service
from app.db.session import SessionDep
from app.errors import QuiverError
from app.oauth.service import oauth_service
from app.ui.deps import LIST_ALL, AdminFormDep, ConsoleDep, CsrfField, done, failed, first_error
from app.ui.picker import agent_choices, find_text
from app.ui.render import page
from app.ui.sessions import Console

router = APIRouter(prefix="/ui", include_in_schema=False)
KEYS = "/ui/keys"


async def _keys_page(
    request: Request,
    session: AsyncSession,
    console: Console,
    *,
    created: tuple[ApiKeyRead, str] | None = None,
    status_code: int = 200,
) -> Response:
    keys: list[ApiKeyRead] = []
    choices = None
    names: dict[str, str] = {}
    if console.admin:
        rows, _ = await api_key_service.list(session, limit=LIST_ALL, offset=0)
        keys = [ApiKeyRead.model_validate(row) for row in rows]
        # the new key's agents: a search by name (find_agents), not a list of them all
        choices = await agent_choices(
            session, console.principal, find_text(request, "find_agents"), set()
        )
        named = {agent_id for key in keys for agent_id in key.agent_ids or ()}
        names = {str(row.id): row.name for row in await agent_service.named_ids(session, named)}
    return page(
        request,
        "keys.html",
        console,
        status_code=status_code,
        nav="keys",
        keys=sorted(keys, key=lambda k: (k.revoked_at is not None, k.name)),
        agent_choices=choices,
        agent_names=names,
        tokens=await oauth_service.live_tokens(session, console.principal),
        created=created,
    )


@router.get("/keys", response_class=HTMLResponse)
async def keys(request: Request, session: SessionDep, console: ConsoleDep) -> Response:
    return await _keys_page(request, session, console)


@router.post("/keys", response_class=HTMLResponse)
async def create_key(
    request: Request,
    form: AdminFormDep,
    name: Annotated[str, Form(max_length=200)],
    scopes: Annotated[list[str] | None, Form()] = None,
    agent_ids: Annotated[list[str] | None, Form()] = None,
    rate_limit_per_minute: Annotated[str, Form(max_length=12)] = "",
) -> Response:
    """The new key is on this answer's page only (never stored, never in an address)."""
    try:
        body = ApiKeyCreate.model_validate(
            {
                "name": name.strip(),
                "scopes": scopes or [],
                "agent_ids": [a for a in agent_ids or [] if a] or None,
                "rate_limit_per_minute": rate_limit_per_minute.strip() or None,
            }
        )
        row, secret = await api_key_service.create(form.session, body)
    except QuiverError as exc:
        return await failed(form.session, form.console, KEYS, exc.message)
    except ValidationError as exc:
        return await failed(form.session, form.console, KEYS, first_error(exc))
    created = (ApiKeyRead.model_validate(row), secret)
    return await _keys_page(request, form.session, form.console, created=created)


@router.post("/keys/{key_id}/revoke")
async def revoke_key(key_id: uuid.UUID, form: AdminFormDep) -> Response:
    async def write() -> RedirectResponse:
        await api_key_service.revoke(form.session, key_id)
        return done(form.console, KEYS, "key revoked")

    return await form.submit(KEYS, write)


@router.post("/keys/oauth/{token_id}/revoke")
async def revoke_oauth_token(
    token_id: uuid.UUID, session: SessionDep, console: ConsoleDep, csrf_token: CsrfField
) -> Response:
    console.check_csrf(csrf_token)
    try:
        await oauth_service.revoke_by_id(session, token_id, console.principal)
    except QuiverError as exc:
        return await failed(session, console, KEYS, exc.message)
    return done(console, KEYS, "OAuth access revoked")
