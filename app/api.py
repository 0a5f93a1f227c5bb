"""Every domain router under /api/v1; admin routers share the AdminKey dependency."""

from __future__ import annotations

from fastapi import APIRouter

from app.agents.router import router as agents_router
from app.apikeys.auth import AdminKey, ChatKey
from app.apikeys.router import router as apikeys_router
from app.approvals.router import router as approvals_router
from app.audit.router import router as audit_router
from app.chat.operator_router import router as operator_router
from app.chat.preview_router import router as agent_preview_router
from app.chat.router import router as chat_router
from app.connectors.router import router as connectors_router
from app.conventions.router import router as conventions_router
from app.databases.router import router as databases_router
from app.knowledge.router import router as knowledge_router
from app.mcp.router import router as mcp_router
from app.skills.router import router as skills_router

ADMIN_ROUTERS = (
    agents_router,
    agent_preview_router,
    connectors_router,
    databases_router,
    mcp_router,
    skills_router,
    knowledge_router,
    conventions_router,
    apikeys_router,
)


API_PREFIX = "/api/v1"


def build_api_router() -> APIRouter:
    api = APIRouter(prefix=API_PREFIX)
    # First: routes are matched in order, and POST /chat is the hot path (no path of the
    # admin routers overlaps the chat router's).
    api.include_router(chat_router, dependencies=[ChatKey])
    for router in ADMIN_ROUTERS:
        api.include_router(router, dependencies=[AdminKey])
    api.include_router(operator_router, dependencies=[ChatKey])
    api.include_router(audit_router, dependencies=[ChatKey])
    api.include_router(approvals_router, dependencies=[ChatKey])
    return api
