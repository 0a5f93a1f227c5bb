"""The agent page's linked-resource pickers: the linked rows always, the others found by name.

A store may hold thousands of connectors, skills or agents, and a list capped at some number
hides the rest. Each kind's picker shows the rows the agent links (checked), then up to `PICK`
others: the newest, or those whose name contains the kind's search text (the filter and the
limit are SQL: `RepositoryBase.named`). Saving replaces the agent's lists with what the form
sends, so the linked rows are always in the form and nothing unseen is dropped.

Typing in a search box asks `GET /ui/agents/{id}/links/{kind}` for that picker's list alone
(htmx), sending the boxes checked so far so they stay in it; without script the box is a plain
GET of the agent page with `find_<kind>=` (the other kinds' searches ride along).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.ext.asyncio import AsyncSession

from app.agents.models import Agent
from app.agents.service import agent_service
from app.connectors.service import connector_service
from app.databases.service import database_service
from app.db.session import SessionDep
from app.errors import Invalid, NotFound
from app.kit.crud import CrudService
from app.kit.repository import Named
from app.knowledge.service import knowledge_base_service
from app.mcp.service import mcp_server_service
from app.skills.service import skill_service
from app.tenancy.principal import Principal
from app.ui.deps import AdminDep, ConsoleDep
from app.ui.render import page

router = APIRouter(prefix="/ui", include_in_schema=False)

PICK = 50
"""Unlinked rows a picker shows: the newest, or the first matches of a search by name."""
FIND_MAX = 200
"""Longest search text (names are at most 64 characters)."""


@dataclass(frozen=True)
class Kind:
    slug: str
    """The agent's relationship (`Agent.connectors`), the route's `{kind}` and `find_<slug>`."""
    field: str
    """The form field (and `AgentUpdate` list) of its ids."""
    label: str
    service: CrudService[Any]


KINDS = (
    Kind("connectors", "connector_ids", "Connectors", connector_service),
    Kind("databases", "database_ids", "Databases", database_service),
    Kind("mcp_servers", "mcp_server_ids", "MCP servers", mcp_server_service),
    Kind("skills", "skill_ids", "Skills", skill_service),
    Kind("knowledge_bases", "knowledge_base_ids", "Knowledge bases", knowledge_base_service),
    Kind("delegates", "delegate_ids", "Delegate agents (call_agent)", agent_service),
)
BY_SLUG = {kind.slug: kind for kind in KINDS}


@dataclass(frozen=True)
class Option:
    id: uuid.UUID
    name: str
    checked: bool


@dataclass(frozen=True)
class Picker:
    kind: Kind
    find: str
    options: list[Option]
    """The kept rows (linked or checked) by name, then the others found."""
    found: int
    """How many of the options were found rather than kept."""
    more: bool
    """More rows than `limit` match: a (narrower) search shows them."""
    limit: int


def find_text(request: Request, param: str) -> str:
    text = request.query_params.get(param, "").strip()
    if len(text) > FIND_MAX:
        raise Invalid(f"{param}: at most {FIND_MAX} characters")
    return text


def picked_ids(request: Request, param: str) -> set[uuid.UUID]:
    """The ids the browser has checked or selected (htmx sends them with the search)."""
    found: set[uuid.UUID] = set()
    for value in request.query_params.getlist(param):
        if not value:
            continue
        try:
            found.add(uuid.UUID(value))
        except ValueError:
            raise Invalid(f"{param}: {value[:40]!r} is not an id") from None
    return found


async def picker(
    session: AsyncSession,
    agent: Agent,
    kind: Kind,
    find: str,
    picked: set[uuid.UUID] | None = None,
) -> Picker:
    """One kind's picker; `picked` is what the browser has checked (None: what is saved)."""
    linked = {row.id: Named(row.id, row.name) for row in getattr(agent, kind.slug)}
    chosen = set(linked) if picked is None else picked
    kept = dict(linked)
    others = chosen - set(linked) - {agent.id}
    kept.update({row.id: row for row in await kind.service.named_ids(session, others)})
    exclude = set(kept) | ({agent.id} if kind.slug == "delegates" else set())
    found, more = await kind.service.find_named(session, find, limit=PICK, exclude=exclude)
    options = [
        Option(row.id, row.name, row.id in chosen)
        for row in sorted(kept.values(), key=lambda row: row.name)
    ]
    options += [Option(row.id, row.name, False) for row in found]
    return Picker(kind=kind, find=find, options=options, found=len(found), more=more, limit=PICK)


async def pickers(session: AsyncSession, request: Request, agent: Agent) -> list[Picker]:
    """Every kind's picker for the agent page, each with its `find_<kind>` search."""
    return [
        await picker(session, agent, kind, find_text(request, f"find_{kind.slug}"))
        for kind in KINDS
    ]


@router.get("/agents/{agent_id}/links/{slug}", response_class=HTMLResponse)
async def pick(
    request: Request, agent_id: uuid.UUID, slug: str, session: SessionDep, console: AdminDep
) -> Response:
    """One picker's list (the search box's htmx request), keeping the boxes checked so far."""
    kind = BY_SLUG.get(slug)
    if kind is None:
        raise NotFound(f"no kind of linked resource named {slug[:40]!r}")
    agent = await agent_service.get(session, agent_id)
    find = find_text(request, f"find_{kind.slug}")
    found = await picker(session, agent, kind, find, picked_ids(request, kind.field))
    return page(request, "_picker.html", console, agent=agent, picker=found)


# The agent selects of the keys page (several, for a new key) and the playground (one).

AGENTS = Kind("agents", "agent_ids", "Agents", agent_service)
"""The agent selects' kind: `find_agents` is their search."""


async def agent_choices(
    session: AsyncSession, principal: Principal, find: str, chosen: set[uuid.UUID]
) -> Picker:
    """The chosen agents (selected), then up to `PICK` others the key may use: the newest, or
    those whose name contains `find`."""
    only = None if principal.agent_ids is None else {uuid.UUID(i) for i in principal.agent_ids}
    usable = {agent_id for agent_id in chosen if principal.may_use(agent_id)}
    kept = await agent_service.named_ids(session, usable)
    exclude = {row.id for row in kept}
    found, more = await agent_service.find_named(
        session, find, limit=PICK, exclude=exclude, only=only
    )
    options = [Option(row.id, row.name, True) for row in kept]
    options += [Option(row.id, row.name, False) for row in found]
    return Picker(kind=AGENTS, find=find, options=options, found=len(found), more=more, limit=PICK)


@router.get("/keys/agents", response_class=HTMLResponse)
async def key_agents(request: Request, session: SessionDep, console: AdminDep) -> Response:
    """The new-key form's agent options for a search, the agents selected so far first."""
    find = find_text(request, "find_agents")
    chosen = picked_ids(request, "agent_ids")
    choices = await agent_choices(session, console.principal, find, chosen)
    return page(request, "_agent_options.html", console, choices=choices)


@router.get("/playground/agents", response_class=HTMLResponse)
async def playground_agents(request: Request, session: SessionDep, console: ConsoleDep) -> Response:
    """The playground's agent options for a search (only agents the key may use), the chosen
    agent first."""
    find = find_text(request, "find_agents")
    chosen = picked_ids(request, "agent_id")
    choices = await agent_choices(session, console.principal, find, chosen)
    return page(request, "_agent_options.html", console, choices=choices)
