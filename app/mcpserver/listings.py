"""Prompts and resources of an MCP session, and their `list_changed` notifications.

What a session has listed is kept beside it (weakly: it goes with the session's state), so
that a `tools/call` can tell the client when its lists are stale, as `request_tools` does for
tools: `notifications/resources/list_changed` when a tool returned resource links (listed and
readable from then on), and `notifications/prompts/list_changed` /
`notifications/resources/list_changed` when the agent's skills or knowledge changed.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from app.agents.models import Agent
from app.mcp.render import resource_links
from app.mcpserver import prompts
from app.mcpserver.resources import Link, Resources, fingerprint
from app.mcpserver.state import McpSession

AgentNow = Callable[[Agent], Awaitable[Agent]]
"""The agent as stored now (the cached row), for a session opened with an older one."""


@dataclass(kw_only=True)
class _Seen:
    links: dict[str, Link] = field(default_factory=dict)
    prompts: tuple[Any, ...] | None = None
    resources: tuple[Any, ...] | None = None


class Listings:
    def __init__(self, resources: Resources, agent_now: AgentNow) -> None:
        self._resources = resources
        self._agent_now = agent_now
        self._seen: weakref.WeakKeyDictionary[McpSession, _Seen] = weakref.WeakKeyDictionary()

    def _of(self, state: McpSession) -> _Seen:
        seen = self._seen.get(state)
        if seen is None:
            seen = self._seen[state] = _Seen()
        return seen

    async def list_prompts(self, state: McpSession) -> types.ListPromptsResult:
        agent = await self._agent_now(state.agent)
        self._of(state).prompts = prompts.prompts_fingerprint(agent)
        return prompts.list_prompts(agent)

    async def get_prompt(self, state: McpSession, name: str) -> types.GetPromptResult:
        return prompts.get_prompt(await self._agent_now(state.agent), name)

    async def list_resources(self, state: McpSession) -> types.ListResourcesResult:
        agent = await self._agent_now(state.agent)
        seen = self._of(state)
        seen.resources = fingerprint(agent)
        return await self._resources.list(agent, seen.links)

    async def read_resource(self, state: McpSession, uri: str) -> types.ReadResourceResult:
        agent = await self._agent_now(state.agent)
        return await self._resources.read(agent, uri, self._of(state).links)

    async def after_call(
        self, state: McpSession, text: str, arguments: dict[str, Any]
    ) -> tuple[list[types.ServerNotification], list[types.ResourceLink]]:
        """The notifications a call's answer carries, and the resource links it returned
        (handed to the client as links it can read through this endpoint)."""
        seen = self._of(state)
        found = resource_links(text)
        server = arguments.get("server") if isinstance(arguments.get("server"), str) else None
        new = False
        for uri, name in found:
            if uri not in seen.links:
                seen.links[uri] = Link(uri=uri, name=name, server=server)
                new = True
        notes: list[types.ServerNotification] = []
        resources_moved = False
        if seen.prompts is not None or seen.resources is not None:  # the client listed them
            agent = await self._agent_now(state.agent)
            if seen.prompts is not None and seen.prompts != prompts.prompts_fingerprint(agent):
                seen.prompts = None
                notes.append(types.PromptListChangedNotification())
            resources_moved = seen.resources is not None and seen.resources != fingerprint(agent)
        if new or resources_moved:
            seen.resources = None if resources_moved else seen.resources
            notes.append(types.ResourceListChangedNotification())
        links = [
            types.ResourceLink(type="resource_link", uri=uri, name=name) for uri, name in found
        ]
        return notes, links
