"""Every domain router under /api/v1; admin routers share the AdminKey dependency."""

from __future__ import annotations

from fastapi import FastAPI

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
from app.oauth.router import router as oauth_router
from app.openai_api.router import router as openai_router
from app.skills.router import router as skills_router

API_PREFIX = "/api/v1"

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


def include_api_routers(app: FastAPI) -> None:
    """Each domain router straight on the app under `API_PREFIX`, not through one `/api/v1`
    router: a nested router is matched again at every level, so a request to the fifth admin
    router walked every route before it twice (docs/benchmarks.md, "MCP call overhead")."""
    # First: routes are matched in order, and POST /chat is the hot path (no path of the
    # admin routers overlaps the chat router's).
    app.include_router(chat_router, prefix=API_PREFIX, dependencies=[ChatKey])
    for router in ADMIN_ROUTERS:
        app.include_router(router, prefix=API_PREFIX, dependencies=[AdminKey])
    app.include_router(operator_router, prefix=API_PREFIX, dependencies=[ChatKey])
    app.include_router(audit_router, prefix=API_PREFIX, dependencies=[ChatKey])
    app.include_router(approvals_router, prefix=API_PREFIX, dependencies=[ChatKey])
    # Each agent as a model (docs/openai-api.md): `/v1/...`, errors in OpenAI's shape.
    app.include_router(openai_router, dependencies=[ChatKey])
    # Public: OAuth metadata, registration, token and revocation (outside /api/v1).
    app.include_router(oauth_router)
