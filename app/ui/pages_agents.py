"""The agents pages: list, create, linked resources and the tool-set preview."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any, get_args

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError

from app.agents.schemas import AgentCreate, AgentUpdate, Category
from app.agents.service import agent_service
from app.chat.selector import llm_selector
from app.db.session import SessionDep
from app.deps import RuntimeDep
from app.ui import sessions
from app.ui.deps import PAGE, AdminDep, AdminFormDep, Offset, done
from app.ui.picker import pickers
from app.ui.render import back, page
from app.ui.toolset_view import toolset_view

router = APIRouter(prefix="/ui", include_in_schema=False)
CATEGORIES: tuple[str, ...] = get_args(Category)
PREVIEW_TARGET = "preview-body"  # the id htmx names in HX-Target (agent.html's preview form)


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
    if request.headers.get("HX-Target") == PREVIEW_TARGET:
        # The preview form asks for its own part only: the pickers (six kinds) are neither
        # loaded nor rendered for a new query.
        return page(request, "_toolset_preview.html", console, agent=agent, query=query, view=view)
    # The pickers: each kind's linked rows and up to PICK others, found by name in SQL.
    found = await pickers(session, request, agent)
    return page(
        request,
        "agent.html",
        console,
        agent=agent,
        query=query,
        view=view,
        pickers=found,
        categories=CATEGORIES,
        config_text=json.dumps(agent.model_config_json, indent=2, ensure_ascii=False),
    )


@router.post("/agents/{agent_id}/settings")
async def save_settings(
    agent_id: uuid.UUID,
    form: AdminFormDep,
    description: Annotated[str, Form(max_length=2000)] = "",
    instructions: Annotated[str, Form(max_length=200_000)] = "",
    model: Annotated[str, Form(max_length=128)] = "",
    model_config_json: Annotated[str, Form(max_length=200_000)] = "{}",
    all_categories: Annotated[bool, Form()] = False,
    tool_categories: Annotated[list[str] | None, Form()] = None,
) -> Response:
    """Instructions, model, `model_config_json` and tool categories, validated by `AgentUpdate`
    (the API's own schema); a refused field keeps what was typed and says why beside it."""
    path = f"/ui/agents/{agent_id}"
    sent = {
        "description": description,
        "instructions": instructions,
        "model": model,
        "model_config_json": model_config_json,
    }
    fields: dict[str, str] = {}
    body: dict[str, Any] = {
        "description": description,
        "instructions": instructions,
        "model": model.strip() or None,
        "tool_categories": None if all_categories else (tool_categories or []),
    }
    try:
        config = json.loads(model_config_json or "{}")
    except json.JSONDecodeError as exc:
        fields["model_config_json"] = f"not valid JSON: {exc.msg} (line {exc.lineno})"
    else:
        if isinstance(config, dict):
            body["model_config_json"] = config
        else:
            fields["model_config_json"] = "must be a JSON object ({...})"
    update: AgentUpdate | None = None
    try:
        update = AgentUpdate.model_validate(body)
    except ValidationError as exc:
        for err in exc.errors():
            field = str(err["loc"][0]) if err["loc"] else "settings"
            fields.setdefault(field, str(err["msg"]).removeprefix("Value error, "))
    if fields or update is None:
        await form.session.rollback()
        summary = "; ".join(f"{k}: {v}" for k, v in fields.items())
        sessions.remember(form.console, error=f"not saved — {summary}", fields=fields, values=sent)
        return back(path)

    async def write() -> RedirectResponse:
        await agent_service.update(form.session, agent_id, update)
        return done(form.console, path, "settings saved")

    return await form.submit(path, write)


@router.post("/agents/{agent_id}/links")
async def link_resources(
    agent_id: uuid.UUID,
    form: AdminFormDep,
    connector_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    database_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    mcp_server_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    skill_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    knowledge_base_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
    delegate_ids: Annotated[list[uuid.UUID] | None, Form()] = None,
) -> Response:
    path = f"/ui/agents/{agent_id}"

    async def write() -> RedirectResponse:
        update = AgentUpdate(
            connector_ids=connector_ids or [],
            database_ids=database_ids or [],
            mcp_server_ids=mcp_server_ids or [],
            skill_ids=skill_ids or [],
            knowledge_base_ids=knowledge_base_ids or [],
            delegate_ids=delegate_ids or [],
        )
        await agent_service.update(form.session, agent_id, update)
        return done(form.console, path, "linked resources saved")

    return await form.submit(path, write)
