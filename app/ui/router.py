"""The console's pages under `/ui`: thin handlers over the domain services.

Every page needs a live session (else a redirect to `/ui/login`); the agents and resources
pages need an admin key (a chat key gets 403); every POST carries the session's CSRF token.
"""

from __future__ import annotations

from fastapi import APIRouter

from app.ui import (
    pages_agents,
    pages_approvals,
    pages_auth,
    pages_keys,
    pages_knowledge,
    pages_oauth,
    pages_resources,
    pages_runs,
    pages_tools,
    picker,
)

router = APIRouter()
for pages in (
    pages_auth,
    pages_agents,
    pages_approvals,
    pages_knowledge,
    pages_resources,
    pages_runs,
    pages_tools,
    pages_keys,
    pages_oauth,
    picker,
):
    router.include_router(pages.router)
