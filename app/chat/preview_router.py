"""`GET /agents/{id}/toolset`: the pipeline preview of an agent (an admin route).

It lives above the agents domain because it runs the pipeline and the `llm` selector.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.agents.service import agent_service
from app.chat.deps import BackendsDep, RunManagerDep
from app.chat.selector import llm_selector
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES
from app.kit.state import SettingsDep
from app.pipeline.preview import ToolsetPreview, preview_toolset

router = APIRouter(prefix="/agents", tags=["agents"])


@router.get("/{id}/toolset", response_model=ToolsetPreview, responses=ERROR_RESPONSES)
async def preview_agent_toolset(
    id: uuid.UUID,
    session: SessionDep,
    settings: SettingsDep,
    runs: RunManagerDep,
    backends: BackendsDep,
    query: Annotated[
        str,
        Query(
            max_length=4_000,
            description="The user message to select for (URL-encoded it stays under the "
            "HTTP server's request-line limit)",
        ),
    ] = "",
) -> ToolsetPreview:
    """The pipeline preview: modes, prompt, tools as the model sees them, and token savings."""
    agent = await agent_service.get(session, id)
    llm = runs.llm
    selector = llm_selector(llm, model=agent.model) if llm is not None else None
    return await preview_toolset(agent, settings, backends, query, selector=selector)
