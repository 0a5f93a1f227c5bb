"""MCP resources on the agent endpoint.

Three kinds, all limited to what the agent is linked to:
- `quiver://skills/<skill>/<path>`: each file of its skills' folders (and `SKILL.md`);
- `quiver://knowledge/<knowledge base>/<document>`: the documents of its knowledge bases;
- the resource links its MCP servers' tools returned in this session (`demo://…`): listed once
  a call returned them, and read through to the upstream server (the one whose tool returned
  the link first, then the agent's other servers).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from urllib.parse import quote, unquote

import mcp_types as types
from mcp.shared.exceptions import MCPError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.models import Agent
from app.errors import QuiverError
from app.knowledge.repository import DocumentRepository
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcpserver.prompts import agent_skills
from app.pipeline.sources.stubs import skill_body
from app.skills.backend import SkillFileBackend
from app.skills.models import Skill

SKILLS = "quiver://skills/"
KNOWLEDGE = "quiver://knowledge/"
RESOURCE_NOT_FOUND = -32002
"""The MCP specification's error code for an unknown resource URI."""
_MEDIA = {"markdown": "text/markdown", "html": "text/markdown", "text": "text/plain"}
"""Knowledge documents are stored as text (HTML converted on the way in)."""


@dataclass(frozen=True, kw_only=True)
class Link:
    """A resource link an upstream tool returned in this session."""

    uri: str
    name: str
    server: str | None
    """The MCP server whose tool returned it, when known."""


def skill_uri(skill: str, path: str) -> str:
    return f"{SKILLS}{skill}/{quote(path, safe='/')}"


def knowledge_uri(base: str, document: str) -> str:
    return f"{KNOWLEDGE}{base}/{quote(document, safe='')}"


def _not_found(uri: str, why: str) -> MCPError:
    return MCPError(RESOURCE_NOT_FOUND, f"resource {uri!r} not found: {why}")


class Resources:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        files: SkillFileBackend | None,
        pool: McpPool,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._files = files
        self._pool = pool

    # --- resources/list ---------------------------------------------------------------

    async def list(self, agent: Agent, links: dict[str, Link]) -> types.ListResourcesResult:
        resources: list[types.Resource] = []
        for skill in agent_skills(agent):
            resources.append(
                types.Resource(
                    uri=skill_uri(skill.name, "SKILL.md"),
                    name=f"{skill.name}/SKILL.md",
                    description=skill.description or None,
                    mime_type="text/markdown",
                )
            )
            for info in skill.file_index or []:
                resources.append(
                    types.Resource(
                        uri=skill_uri(skill.name, str(info["path"])),
                        name=f"{skill.name}/{info['path']}",
                        mime_type=str(info.get("media_type") or "application/octet-stream"),
                        size=int(info.get("size") or 0),
                    )
                )
        bases = {kb.id: kb for kb in _knowledge_bases(agent)}
        if bases:
            async with self._sessionmaker() as session:
                rows = await DocumentRepository(session).listing(list(bases))
            for base_id, name, fmt, chars in rows:
                base = bases[base_id]
                resources.append(
                    types.Resource(
                        uri=knowledge_uri(base.name, name),
                        name=f"{base.name}/{name}",
                        description=f"A document of the knowledge base {base.name!r}",
                        mime_type=_MEDIA.get(fmt, "text/plain"),
                        size=chars,
                    )
                )
        resources.extend(types.Resource(uri=link.uri, name=link.name) for link in links.values())
        return types.ListResourcesResult(resources=resources)

    # --- resources/read ---------------------------------------------------------------

    async def read(
        self, agent: Agent, uri: str, links: dict[str, Link]
    ) -> types.ReadResourceResult:
        if uri.startswith(SKILLS):
            return await self._skill_file(agent, uri)
        if uri.startswith(KNOWLEDGE):
            return await self._document(agent, uri)
        return await self._upstream(agent, uri, links.get(uri))

    async def _skill_file(self, agent: Agent, uri: str) -> types.ReadResourceResult:
        name, _, raw_path = uri.removeprefix(SKILLS).partition("/")
        path = unquote(raw_path)
        skill: Skill | None = next((s for s in agent_skills(agent) if s.name == name), None)
        if skill is None:
            raise _not_found(uri, f"the agent has no skill {name!r}")
        if path == "SKILL.md":
            return _text(uri, "text/markdown", skill_body(skill))
        known = {str(f["path"]) for f in skill.file_index or []}
        found = (
            await self._files.read_file(skill.id, path)
            if path in known and self._files is not None
            else None
        )
        if found is None:
            raise _not_found(uri, f"skill {name!r} has no file {path!r}")
        if found.text is not None:
            return _text(uri, found.media_type, found.text)
        blob = base64.b64encode(found.data or b"").decode("ascii")
        return types.ReadResourceResult(
            contents=[types.BlobResourceContents(uri=uri, mime_type=found.media_type, blob=blob)]
        )

    async def _document(self, agent: Agent, uri: str) -> types.ReadResourceResult:
        base_name, _, raw = uri.removeprefix(KNOWLEDGE).partition("/")
        name = unquote(raw)
        base = next((kb for kb in _knowledge_bases(agent) if kb.name == base_name), None)
        if base is None:
            raise _not_found(uri, f"the agent has no knowledge base {base_name!r}")
        async with self._sessionmaker() as session:
            document = await DocumentRepository(session).named(base.id, name)
            if document is None:
                raise _not_found(uri, f"knowledge base {base_name!r} has no document {name!r}")
            return _text(uri, _MEDIA.get(document.format, "text/plain"), document.text)

    async def _upstream(
        self, agent: Agent, uri: str, link: Link | None
    ) -> types.ReadResourceResult:
        servers = _mcp_servers(agent)
        if link is not None and link.server is not None:
            servers.sort(key=lambda s: s.name != link.server)
        if not servers:
            raise _not_found(uri, "the agent has no MCP server to read it from")
        errors: list[str] = []
        for server in servers:
            try:
                result = await self._pool.read_resource(server, uri)
            except QuiverError as exc:
                errors.append(exc.message)
                continue
            return types.ReadResourceResult(contents=result.contents)
        raise _not_found(uri, "; ".join(errors))


def _text(uri: str, mime: str, text: str) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
    )


def _knowledge_bases(agent: Agent) -> list[_Base]:
    categories = agent.tool_categories
    if categories is not None and "knowledge" not in categories:
        return []
    return [_Base(id=kb.id, name=kb.name) for kb in agent.knowledge_bases]


def _mcp_servers(agent: Agent) -> list[McpServer]:
    categories = agent.tool_categories
    if categories is not None and "mcp" not in categories:
        return []
    return list(agent.mcp_servers)


@dataclass(frozen=True, kw_only=True)
class _Base:
    id: uuid.UUID
    name: str


def fingerprint(agent: Agent) -> tuple[object, ...]:
    """What the agent's own resources depend on (skills' files, knowledge bases): a change
    means `resources/list_changed`. Links returned by tools are announced when they come."""
    skills = tuple((s.name, str(s.updated_at)) for s in agent_skills(agent))
    bases = tuple((kb.name, kb.document_count, str(kb.updated_at)) for kb in agent.knowledge_bases)
    return skills, bases
