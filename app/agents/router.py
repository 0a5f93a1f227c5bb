from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from app.agents.schemas import AgentCreate, AgentRead, AgentUpdate
from app.agents.service import agent_service
from app.chat.selector import llm_selector
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.pipeline.preview import ToolsetPreview, preview_toolset
from app.runtime import RuntimeDep

router = APIRouter(prefix="/agents", tags=["agents"])
add_crud_routes(
    router, service=agent_service, create=AgentCreate, update=AgentUpdate, read=AgentRead
)


@router.get("/{id}/toolset", response_model=ToolsetPreview, responses=ERROR_RESPONSES)
async def preview_agent_toolset(
    id: uuid.UUID,
    session: SessionDep,
    runtime: RuntimeDep,
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
    llm = runtime.runs.llm
    selector = llm_selector(llm, model=agent.model) if llm is not None else None
    return await preview_toolset(
        agent, runtime.settings, runtime.backends, query, selector=selector
    )
