"""The console's pages under `/ui`: thin handlers over the domain services.

Every page needs a live session (else a redirect to `/ui/login`); the agents and resources
pages need an admin key (a chat key gets 403); every POST carries the session's CSRF token.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.schemas import AgentCreate, AgentUpdate
from app.agents.service import agent_service
from app.audit.repository import ToolCallRepository
from app.chat.operator import get_run, list_runs
from app.chat.schemas import RunRead
from app.chat.selector import llm_selector
from app.chat.service import get_conversation
from app.connectors.schemas import ConnectorImport, ConnectorRead
from app.connectors.service import connector_service
from app.databases.schemas import DatabaseRead, TableUpdate
from app.databases.service import database_service
from app.db.session import SessionDep
from app.errors import Invalid, QuiverError
from app.kit.pagination import PageParams
from app.mcp.schemas import McpServerRead
from app.mcp.service import mcp_server_service
from app.runtime import RuntimeDep
from app.skills.service import skill_service
from app.ui import sessions
from app.ui.api_auth import SESSION_COOKIE
from app.ui.render import PageForbidden, SignInRequired, back, page
from app.ui.sessions import CSRF_FIELD, PRELOGIN_COOKIE, Console
from app.ui.toolset_view import toolset_view

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = 25
"""Rows per page of the console's lists."""
LIST_ALL = 200
MAX_UPLOAD = 5_000_000
RUN_STATUSES = ("running", "completed", "max_iterations", "stopped", "cancelled", "failed")
TOOL_KINDS = ("connector", "database", "mcp", "skill", "builtin")


async def _console(request: Request, session: SessionDep) -> Console:
    console = await sessions.current(session, request)
    if console is None:
        raise SignInRequired()
    return console


async def _admin(console: Annotated[Console, Depends(_console)]) -> Console:
    if not console.admin:
        raise PageForbidden("this page needs an API key with scope 'admin'")
    return console


ConsoleDep = Annotated[Console, Depends(_console)]
AdminDep = Annotated[Console, Depends(_admin)]
CsrfField = Annotated[str, Form(alias=CSRF_FIELD)]
Offset = Annotated[int, Query(ge=0)]


async def _failed(
    session: AsyncSession, console: Console, path: str, error: str
) -> RedirectResponse:
    """Undo the form's writes, keep its error for the next page."""
    await session.rollback()
    sessions.remember(console, error=error)
    return back(path)


def _done(console: Console, path: str, notice: str) -> RedirectResponse:
    sessions.remember(console, notice=notice)
    return back(path)


# --- sign-in --------------------------------------------------------------------------------


@router.get("", response_class=HTMLResponse)
async def home(request: Request, session: SessionDep) -> Response:
    console = await sessions.current(session, request)
    if console is None:
        return back("/ui/login")
    return back("/ui/agents" if console.admin else "/ui/playground")


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request) -> Response:
    token = sessions.new_token()
    response = page(request, "login.html", None, login_token=token)
    response.set_cookie(
        PRELOGIN_COOKIE,
        token,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=sessions.cookie_secure(request),
        max_age=3600,
    )
    return response


@router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    session: SessionDep,
    api_key: Annotated[str, Form(max_length=1024)],
    csrf_token: CsrfField,
) -> Response:
    expected = request.cookies.get(PRELOGIN_COOKIE, "")
    if not expected or not sessions.tokens_match(expected, csrf_token):
        return page(
            request,
            "forbidden.html",
            None,
            status_code=403,
            message="missing or invalid CSRF token: reload the sign-in page",
            status=403,
        )
    signed_in = await sessions.sign_in(session, api_key)
    if signed_in is None:
        token = sessions.new_token()
        response = page(
            request,
            "login.html",
            None,
            status_code=401,
            login_token=token,
            failure="invalid or revoked API key (or one without scope admin or chat)",
        )
        response.set_cookie(
            PRELOGIN_COOKIE,
            token,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=sessions.cookie_secure(request),
            max_age=3600,
        )
        return response
    session_id, key = signed_in
    redirect = back("/ui/agents" if "admin" in key.scopes else "/ui/playground")
    redirect.set_cookie(
        SESSION_COOKIE,
        session_id,
        path="/",
        httponly=True,
        samesite="strict",
        secure=sessions.cookie_secure(request),
        max_age=int(sessions.SESSION_TTL.total_seconds()),
    )
    redirect.delete_cookie(PRELOGIN_COOKIE, path="/ui")
    return redirect


@router.post("/logout")
async def logout(
    request: Request, session: SessionDep, console: ConsoleDep, csrf_token: CsrfField
) -> Response:
    console.check_csrf(csrf_token)
    await sessions.sign_out(session, request)
    response = back("/ui/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


# --- agents ---------------------------------------------------------------------------------


@router.get("/agents", response_class=HTMLResponse)
async def agents(
    request: Request, session: SessionDep, console: AdminDep, offset: Offset = 0
) -> Response:
    rows, total = await agent_service.list(session, limit=PAGE, offset=offset)
    return page(request, "agents.html", console, agents=rows, total=total, offset=offset, size=PAGE)


@router.post("/agents")
async def create_agent(
    session: SessionDep,
    console: AdminDep,
    csrf_token: CsrfField,
    name: Annotated[str, Form(max_length=200)],
    instructions: Annotated[str, Form(max_length=100_000)] = "",
) -> Response:
    console.check_csrf(csrf_token)
    try:
        agent = await agent_service.create(
            session, AgentCreate.model_validate({"name": name, "instructions": instructions})
        )
    except QuiverError as exc:
        return await _failed(session, console, "/ui/agents", exc.message)
    except ValueError as exc:
        return await _failed(session, console, "/ui/agents", _first_error(exc))
    return _done(console, f"/ui/agents/{agent.id}", f"agent {agent.name} created")


@router.get("/agents/{agent_id}", response_class=HTMLResponse)
async def agent_detail(
    request: Request,
    agent_id: uuid.UUID,
    session: SessionDep,
    runtime: RuntimeDep,
    console: AdminDep,
    query: Annotated[str, Query(max_length=20_000)] = "",
) -> Response:
    agent = await agent_service.get(session, agent_id)
    llm = runtime.runs.llm
    selector = llm_selector(llm, model=agent.model) if llm is not None else None
    view = await toolset_view(agent, runtime.settings, runtime.backends, query, selector=selector)
    choices = {
        "connector_ids": (await connector_service.list(session, limit=LIST_ALL, offset=0))[0],
        "database_ids": (await database_service.list(session, limit=LIST_ALL, offset=0))[0],
        "mcp_server_ids": (await mcp_server_service.list(session, limit=LIST_ALL, offset=0))[0],
        "skill_ids": (await skill_service.list(session, limit=LIST_ALL, offset=0))[0],
    }
    return page(
        request,
        "agent.html",
        console,
        agent=agent,
        query=query,
        view=view,
        choices=choices,
        linked={field: {str(i) for i in getattr(agent, field)} for field in choices},
    )


@router.post("/agents/{agent_id}/links")
async def link_resources(
    agent_id: uuid.UUID,
    session: SessionDep,
    console: AdminDep,
    csrf_token: CsrfField,
    connector_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    database_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    mcp_server_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    skill_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
) -> Response:
    console.check_csrf(csrf_token)
    path = f"/ui/agents/{agent_id}"
    update = AgentUpdate(
        connector_ids=connector_ids or [],
        database_ids=database_ids or [],
        mcp_server_ids=mcp_server_ids or [],
        skill_ids=skill_ids or [],
    )
    try:
        await agent_service.update(session, agent_id, update)
    except QuiverError as exc:
        return await _failed(session, console, path, exc.message)
    return _done(console, path, "linked resources saved")


# --- resources ------------------------------------------------------------------------------


@router.get("/resources", response_class=HTMLResponse)
async def resources(request: Request, session: SessionDep, console: AdminDep) -> Response:
    connectors, connector_total = await connector_service.list(session, limit=LIST_ALL, offset=0)
    databases, _ = await database_service.list(session, limit=LIST_ALL, offset=0)
    servers, _ = await mcp_server_service.list(session, limit=LIST_ALL, offset=0)
    skills, _ = await skill_service.list(session, limit=LIST_ALL, offset=0)
    return page(
        request,
        "resources.html",
        console,
        connectors=connectors,
        connector_total=connector_total,
        databases=[DatabaseRead.model_validate(d) for d in databases],
        servers=[McpServerRead.model_validate(s) for s in servers],
        skills=skills,
    )


@router.get("/resources/connectors/{connector_id}", response_class=HTMLResponse)
async def connector_detail(
    request: Request,
    connector_id: uuid.UUID,
    session: SessionDep,
    console: AdminDep,
    offset: Offset = 0,
) -> Response:
    connector = ConnectorRead.model_validate(await connector_service.get(session, connector_id))
    actions, total = await connector_service.list_actions(
        session, connector_id, limit=PAGE, offset=offset
    )
    return page(
        request,
        "connector.html",
        console,
        connector=connector,
        actions=actions,
        total=total,
        offset=offset,
        size=PAGE,
    )


@router.post("/resources/connectors/import")
async def import_openapi(
    session: SessionDep,
    console: AdminDep,
    csrf_token: CsrfField,
    document: Annotated[str, Form(max_length=MAX_UPLOAD)] = "",
    file: Annotated[UploadFile | None, File()] = None,
    name: Annotated[str, Form(max_length=200)] = "",
    base_url: Annotated[str, Form(max_length=2048)] = "",
) -> Response:
    console.check_csrf(csrf_token)
    try:
        text = await _upload_text(file) or document
        if not text.strip():
            raise Invalid("paste an OpenAPI document or choose a file")
        body = ConnectorImport.model_validate(
            {"document": text, "name": name or None, "base_url": base_url or None}
        )
        imported = await connector_service.import_openapi(session, body)
    except QuiverError as exc:
        return await _failed(session, console, "/ui/resources", exc.message)
    except ValueError as exc:
        return await _failed(session, console, "/ui/resources", _first_error(exc))
    notice = f"connector {imported.name} imported with {len(imported.actions)} actions"
    if imported.warnings:
        notice += " (" + "; ".join(imported.warnings[:3]) + ")"
    return _done(console, f"/ui/resources/connectors/{imported.id}", notice)


@router.post("/resources/skills/import")
async def import_skill(
    session: SessionDep,
    console: AdminDep,
    csrf_token: CsrfField,
    document: Annotated[str, Form(max_length=200_000)] = "",
    file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    console.check_csrf(csrf_token)
    try:
        text = await _upload_text(file) or document
        if not text.strip():
            raise Invalid("paste a SKILL.md document or choose a file")
        skill = await skill_service.import_document(session, text)
    except QuiverError as exc:
        return await _failed(session, console, "/ui/resources", exc.message)
    except ValueError as exc:
        return await _failed(session, console, "/ui/resources", _first_error(exc))
    return _done(console, "/ui/resources", f"skill {skill.name} imported")


@router.post("/resources/mcp/{server_id}/refresh")
async def refresh_mcp(
    server_id: uuid.UUID,
    session: SessionDep,
    runtime: RuntimeDep,
    console: AdminDep,
    csrf_token: CsrfField,
) -> Response:
    console.check_csrf(csrf_token)
    try:
        server = await mcp_server_service.refresh(session, server_id, runtime.mcp)
    except QuiverError as exc:
        return await _failed(session, console, "/ui/resources", exc.message)
    return _done(console, "/ui/resources", f"{server.name}: {len(server.tools_cache)} tools")


@router.post("/resources/databases/{database_id}/introspect")
async def introspect_database(
    database_id: uuid.UUID,
    session: SessionDep,
    runtime: RuntimeDep,
    console: AdminDep,
    csrf_token: CsrfField,
) -> Response:
    console.check_csrf(csrf_token)
    try:
        row = await database_service.introspect(session, database_id, runtime.engines)
    except QuiverError as exc:
        return await _failed(session, console, "/ui/resources", exc.message)
    return _done(console, "/ui/resources", f"{row.name}: {len(row.schema_cache)} tables")


@router.post("/resources/databases/{database_id}/tables/{table}")
async def set_table_hidden(
    database_id: uuid.UUID,
    table: str,
    session: SessionDep,
    console: AdminDep,
    csrf_token: CsrfField,
    hidden: Annotated[bool, Form()],
) -> Response:
    console.check_csrf(csrf_token)
    try:
        await database_service.update_table(session, database_id, table, TableUpdate(hidden=hidden))
    except QuiverError as exc:
        return await _failed(session, console, "/ui/resources", exc.message)
    state = "hidden from" if hidden else "shown to"
    return _done(console, "/ui/resources", f"table {table} {state} the model")


# --- playground, runs, tool calls -----------------------------------------------------------


@router.get("/playground", response_class=HTMLResponse)
async def playground(
    request: Request,
    session: SessionDep,
    console: ConsoleDep,
    run: uuid.UUID | None = None,
) -> Response:
    rows, _ = await agent_service.list(session, limit=LIST_ALL, offset=0)
    principal = console.principal
    usable = [agent for agent in rows if principal.may_use(agent.id)]
    run_read = await get_run(session, principal, run) if run is not None else None
    prompt = await _prompt(session, console, run_read)
    return page(request, "playground.html", console, agents=usable, run=run_read, prompt=prompt)


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
    run_uuid = _uuid_or_none(run_id)
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
    return page(
        request,
        "tool_calls.html",
        console,
        calls=rows,
        total=total,
        offset=offset,
        size=PAGE,
        filters=filters,
        kinds=TOOL_KINDS,
    )


# --- helpers --------------------------------------------------------------------------------


async def _prompt(session: AsyncSession, console: Console, run: RunRead | None) -> str | None:
    """The user message that started `run` (the journal has the rest)."""
    if run is None:
        return None
    conversation = await get_conversation(session, run.conversation_id, console.principal)
    for message in conversation.messages:
        if message.run_id == run.id and message.role == "user":
            return message.content
    return None


async def _upload_text(file: UploadFile | None) -> str:
    if file is None or not file.filename:
        return ""
    raw = await file.read(MAX_UPLOAD + 1)
    if len(raw) > MAX_UPLOAD:
        raise Invalid(f"file: larger than {MAX_UPLOAD // 1_000_000} MB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Invalid("file: not UTF-8 text") from None


def _uuid_or_none(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value.strip()) if value.strip() else None
    except ValueError:
        return None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        found = errors()
        if found:
            where = ".".join(str(p) for p in found[0].get("loc", ()))
            return f"{where}: {found[0].get('msg', 'invalid')}"
    return str(exc)[:300]
