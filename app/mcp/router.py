from __future__ import annotations

from fastapi import APIRouter

from app.kit.crud_router import add_crud_routes
from app.mcp.schemas import McpServerCreate, McpServerRead, McpServerUpdate
from app.mcp.service import mcp_server_service

router = APIRouter(prefix="/mcp-servers", tags=["mcp-servers"])
add_crud_routes(
    router,
    service=mcp_server_service,
    create=McpServerCreate,
    update=McpServerUpdate,
    read=McpServerRead,
)
