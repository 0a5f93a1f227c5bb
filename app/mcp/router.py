from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request, Response, status

from app.db.row_cache import RowCache
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.schemas import ToolCallResult
from app.kit.state import runtime_part
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.schemas import (
    McpCallRequest,
    McpImportRead,
    McpServerCreate,
    McpServerCreated,
    McpServerRead,
    McpServerUpdate,
)
from app.mcp.service import mcp_server_service

router = APIRouter(prefix="/mcp-servers", tags=["mcp-servers"])
_pool = runtime_part("mcp")
McpPoolDep = Annotated[McpPool, Depends(_pool)]
McpServersDep = Annotated[RowCache[McpServer], Depends(runtime_part("mcp_servers"))]


async def _close_session(request: Request, id: uuid.UUID) -> None:
    pool: McpPool = await _pool(request)
    await pool.invalidate(id)


_IMPORT_EXAMPLE = {
    "mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
        "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer …"}},
    }
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=McpServerCreated,
    responses=ERROR_RESPONSES,
    summary="Create an MCP server (its tools are listed at once)",
)
async def create_server(body: McpServerCreate, session: SessionDep, pool: McpPoolDep) -> Any:
    """A stdio command must be on `QUIVER_MCP_STDIO_COMMANDS` (else 422). The new server's
    tools are listed before the answer; when it cannot be reached it is created all the same,
    with `tools_error` saying why."""
    created = await mcp_server_service.create_listed(session, body, pool)
    return Response(
        created.model_dump_json(exclude_none=False), status_code=201, media_type="application/json"
    )


@router.post(
    "/import",
    response_model=McpImportRead,
    responses=ERROR_RESPONSES,
    summary="Import the MCP servers of a Claude Desktop, Cursor or VS Code configuration",
)
async def import_servers(
    session: SessionDep,
    pool: McpPoolDep,
    document: Annotated[
        dict[str, Any], Body(openapi_examples={"claude": {"value": _IMPORT_EXAMPLE}})
    ],
) -> McpImportRead:
    """`{"mcpServers": {...}}` (Claude Desktop, Cursor, Claude Code) or `{"servers": {...}}`
    (VS Code): each server is created and its tools listed; one result per server."""
    return await mcp_server_service.import_document(session, document, pool)


@router.patch(
    "/{id}",
    response_model=McpServerRead,
    responses=ERROR_RESPONSES,
    summary="Update an MCP server (partial)",
)
async def update_server(
    id: uuid.UUID, body: McpServerUpdate, session: SessionDep, pool: McpPoolDep
) -> Any:
    server = McpServerRead.model_validate(await mcp_server_service.update(session, id, body, pool))
    await pool.invalidate(id)
    return server


add_crud_routes(
    router,
    service=mcp_server_service,
    create=McpServerCreate,
    update=McpServerUpdate,
    read=McpServerRead,
    after_change=_close_session,
    skip=frozenset({"create", "update"}),
)


@router.post(
    "/{id}/refresh",
    response_model=McpServerRead,
    responses={**ERROR_RESPONSES, 502: {}, 503: {}},
)
async def refresh_tools(id: uuid.UUID, session: SessionDep, pool: McpPoolDep) -> Any:
    """Connect and store the server's tool list (the pipeline builds stubs from it)."""
    return McpServerRead.model_validate(await mcp_server_service.refresh(session, id, pool))


@router.post("/{id}/call", response_model=ToolCallResult, responses=ERROR_RESPONSES)
async def call_tool(
    id: uuid.UUID, body: McpCallRequest, pool: McpPoolDep, servers: McpServersDep
) -> Any:
    """Call one tool with the model's guards; answer the text the model would see."""
    result = await mcp_server_service.test_call(id, body, pool, servers)
    # Serialised here in one pass: the result is a `ToolCallResult` already, which FastAPI
    # would validate again before encoding it (`response_model` stays for the OpenAPI schema).
    return Response(result.model_dump_json(), media_type="application/json")
