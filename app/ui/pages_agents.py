"""The agents pages: list, create, linked resources and the tool-set preview."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.agents.schemas import AgentCreate, AgentUpdate
from app.agents.service import agent_service
from app.chat.selector import llm_selector
from app.connectors.service import connector_service
from app.databases.service import database_service
from app.db.session import SessionDep
from app.deps import RuntimeDep
from app.mcp.service import mcp_server_service
from app.skills.service import skill_service
from app.ui.deps import LIST_ALL, PAGE, AdminDep, AdminFormDep, Offset, done
from app.ui.render import page
from app.ui.toolset_view import toolset_view

router = APIRouter(prefix="/ui", include_in_schema=False)


@router.get("/agents", response_class=HTMLResponse)
async def agents(
    request: Request, session: SessionDep, console: AdminDep, offset: Offset = 0
) -> Response:
    rows, total = await agent_service.list(session, limit=PAGE, offset=offset)
    return page(request, "agents.html", console, agents=rows, total=total, offset=offset, size=PAGE)


@router.post("/agents")
async def create_agent(
    form: AdminFormDep,
    name: Annotated[str, Form(max_length=200)],
    instructions: Annotated[str, Form(max_length=100_000)] = "",
) -> Response:
    async def write() -> RedirectResponse:
        agent = await agent_service.create(
            form.session, AgentCreate.model_validate({"name": name, "instructions": instructions})
        )
        return done(form.console, f"/ui/agents/{agent.id}", f"agent {agent.name} created")

    return await form.submit("/ui/agents", write)


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
    form: AdminFormDep,
    connector_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    database_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    mcp_server_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    skill_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
) -> Response:
    path = f"/ui/agents/{agent_id}"

    async def write() -> RedirectResponse:
        update = AgentUpdate(
            connector_ids=connector_ids or [],
            database_ids=database_ids or [],
            mcp_server_ids=mcp_server_ids or [],
            skill_ids=skill_ids or [],
        )
        await agent_service.update(form.session, agent_id, update)
        return done(form.console, path, "linked resources saved")

    return await form.submit(path, write)
