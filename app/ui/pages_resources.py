"""The resources page: connectors (OpenAPI import, actions), databases, MCP servers, skills."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.connectors.schemas import ConnectorImport, ConnectorRead
from app.connectors.service import connector_service
from app.databases.schemas import DatabaseRead, TableUpdate
from app.databases.service import database_service
from app.db.session import SessionDep
from app.deps import RuntimeDep
from app.errors import Invalid
from app.mcp.schemas import McpServerRead
from app.mcp.service import mcp_server_service
from app.skills.service import skill_service
from app.ui.deps import (
    LIST_ALL,
    MAX_UPLOAD,
    PAGE,
    AdminDep,
    AdminFormDep,
    Offset,
    done,
    upload_text,
)
from app.ui.render import page

router = APIRouter(prefix="/ui", include_in_schema=False)
RESOURCES = "/ui/resources"


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
    form: AdminFormDep,
    document: Annotated[str, Form(max_length=MAX_UPLOAD)] = "",
    file: Annotated[UploadFile | None, File()] = None,
    name: Annotated[str, Form(max_length=200)] = "",
    base_url: Annotated[str, Form(max_length=2048)] = "",
) -> Response:
    async def write() -> RedirectResponse:
        text = await upload_text(file) or document
        if not text.strip():
            raise Invalid("paste an OpenAPI document or choose a file")
        body = ConnectorImport.model_validate(
            {"document": text, "name": name or None, "base_url": base_url or None}
        )
        imported = await connector_service.import_openapi(form.session, body)
        notice = f"connector {imported.name} imported with {len(imported.actions)} actions"
        if imported.warnings:
            notice += " (" + "; ".join(imported.warnings[:3]) + ")"
        return done(form.console, f"/ui/resources/connectors/{imported.id}", notice)

    return await form.submit(RESOURCES, write)


@router.post("/resources/skills/import")
async def import_skill(
    form: AdminFormDep,
    document: Annotated[str, Form(max_length=200_000)] = "",
    file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    async def write() -> RedirectResponse:
        text = await upload_text(file) or document
        if not text.strip():
            raise Invalid("paste a SKILL.md document or choose a file")
        skill = await skill_service.import_document(form.session, text)
        return done(form.console, RESOURCES, f"skill {skill.name} imported")

    return await form.submit(RESOURCES, write)


@router.post("/resources/mcp/{server_id}/refresh")
async def refresh_mcp(
    server_id: uuid.UUID,
    runtime: RuntimeDep,
    form: AdminFormDep,
) -> Response:
    async def write() -> RedirectResponse:
        server = await mcp_server_service.refresh(form.session, server_id, runtime.mcp)
        return done(form.console, RESOURCES, f"{server.name}: {len(server.tools_cache)} tools")

    return await form.submit(RESOURCES, write)


@router.post("/resources/databases/{database_id}/introspect")
async def introspect_database(
    database_id: uuid.UUID,
    runtime: RuntimeDep,
    form: AdminFormDep,
) -> Response:
    async def write() -> RedirectResponse:
        row = await database_service.introspect(form.session, database_id, runtime.engines)
        return done(form.console, RESOURCES, f"{row.name}: {len(row.schema_cache)} tables")

    return await form.submit(RESOURCES, write)


@router.post("/resources/databases/{database_id}/tables/{table}")
async def set_table_hidden(
    database_id: uuid.UUID,
    table: str,
    form: AdminFormDep,
    hidden: Annotated[bool, Form()],
) -> Response:
    async def write() -> RedirectResponse:
        await database_service.update_table(
            form.session, database_id, table, TableUpdate(hidden=hidden)
        )
        state = "hidden from" if hidden else "shown to"
        return done(form.console, RESOURCES, f"table {table} {state} the model")

    return await form.submit(RESOURCES, write)
