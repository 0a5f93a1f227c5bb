from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from app.db.row_cache import RowCache
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.schemas import ToolCallResult
from app.kit.state import runtime_part
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.schemas import McpCallRequest, McpServerCreate, McpServerRead, McpServerUpdate
from app.mcp.service import mcp_server_service

router = APIRouter(prefix="/mcp-servers", tags=["mcp-servers"])
_pool = runtime_part("mcp")
McpPoolDep = Annotated[McpPool, Depends(_pool)]
McpServersDep = Annotated[RowCache[McpServer], Depends(runtime_part("mcp_servers"))]


async def _close_session(request: Request, id: uuid.UUID) -> None:
    pool: McpPool = await _pool(request)
    await pool.invalidate(id)


add_crud_routes(
    router,
    service=mcp_server_service,
    create=McpServerCreate,
    update=McpServerUpdate,
    read=McpServerRead,
    after_change=_close_session,
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
