"""The kinds of stored tool source, one entry each, behind one registry.

A kind says where its rows are on the agent, which mode applies, how its meta-tool is built
(progressive mode), how its legacy tools are built, and what it adds to the system prompt.
`assemble.py` loops over `SOURCES` without knowing any kind; a new kind is one more entry
here (and a module of builders next to this one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.agents.models import Agent
from app.config import SkillMode, ToolMode
from app.pipeline.mode import ResolvedModes
from app.pipeline.sources import legacy
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.delegates import call_agent_toolset
from app.pipeline.sources.meta_connector import connector_meta_toolset
from app.pipeline.sources.meta_database import database_meta_toolset
from app.pipeline.sources.meta_mcp import mcp_meta_toolset
from app.pipeline.sources.meta_read_skill import read_skill_toolset
from app.pipeline.sources.stubs import skills_inline, skills_section
from app.tools.base import Toolset
from app.tools.names import NameAllocator

Rows = Sequence[Any]


@dataclass(frozen=True, kw_only=True)
class KindPart:
    """What one kind contributes: a toolset (or none) and a system-prompt section."""

    toolset: Toolset | None = None
    prompt: str = ""
    pinned: frozenset[str] = frozenset()
    """Meta-tool names: kept by runtime selection whatever the query."""


def _backends(backends: Backends | None) -> Backends:
    if backends is None:
        raise ValueError("this kind of tool source needs the execution back-ends")
    return backends


def _inline_max(backends: Backends | None) -> int:
    """Above this many actions a meta-tool's search index is built off the event loop."""
    return _backends(backends).settings.tool_index_inline_max


def _no_prompt(rows: Rows, progressive: bool, query: str) -> str:
    return ""


def _no_tools(rows: Rows, backends: Backends | None, names: NameAllocator) -> Toolset | None:
    return None


@dataclass(frozen=True, kw_only=True)
class Source:
    kind: str
    """The category name in `agent.tool_categories` and in tool-call audit rows."""
    meta_name: str
    """The name of the kind's meta-tool (reserved against legacy tool names)."""
    rows: Callable[[Agent], Rows]
    mode: Callable[[ResolvedModes], ToolMode | SkillMode]
    meta: Callable[[Rows, Backends | None, str], Toolset]
    """Built with the user's message (`str`): its description lists the best-ranked rows."""
    legacy: Callable[[Rows, Backends | None, NameAllocator], Toolset | None] = _no_tools
    prompt: Callable[[Rows, bool, str], str] = _no_prompt
    """The kind's prompt section; the flag says whether the mode is progressive."""
    pin: bool = True
    """Runtime selection keeps the meta-tool whatever the query (false: ranked like any tool)."""

    def part(
        self,
        rows: Rows,
        mode: ToolMode | SkillMode,
        backends: Backends | None = None,
        names: NameAllocator | None = None,
        query: str = "",
    ) -> KindPart:
        """Progressive: the meta-tool (pinned for selection). Otherwise: the legacy tools."""
        if not rows:
            return KindPart()
        progressive = mode.value == "progressive"
        prompt = self.prompt(rows, progressive, query)
        if not progressive:
            toolset = self.legacy(rows, backends, names or NameAllocator())
            return KindPart(toolset=toolset, prompt=prompt)
        toolset = self.meta(rows, backends, query)
        pinned = frozenset(toolset.list_tools()) if self.pin else frozenset()
        return KindPart(toolset=toolset, prompt=prompt, pinned=pinned)


def _skills_prompt(rows: Rows, progressive: bool, query: str) -> str:
    return skills_section(rows, query) if progressive else skills_inline(rows)


CONNECTORS = Source(
    kind="connector",
    meta_name="connector",
    rows=lambda agent: agent.connectors,
    mode=lambda modes: modes.connector,
    meta=lambda rows, b, query: connector_meta_toolset(
        rows, _backends(b).connectors, query, _inline_max(b)
    ),
    legacy=lambda rows, b, names: legacy.connector_tools(rows, _backends(b).connectors, names),
)
DATABASES = Source(
    kind="database",
    meta_name="database",
    rows=lambda agent: agent.databases,
    mode=lambda modes: modes.database,
    meta=lambda rows, b, query: database_meta_toolset(
        rows, _backends(b).databases, query, _inline_max(b)
    ),
    legacy=lambda rows, b, names: legacy.database_tools(rows, _backends(b).databases, names),
)
MCP_SERVERS = Source(
    kind="mcp",
    meta_name="mcp",
    rows=lambda agent: agent.mcp_servers,
    mode=lambda modes: modes.mcp,
    meta=lambda rows, b, query: mcp_meta_toolset(rows, _backends(b).mcp, query, _inline_max(b)),
    legacy=lambda rows, b, names: legacy.mcp_tools_legacy(rows, _backends(b).mcp, names),
)
DELEGATES = Source(
    kind="agent",
    meta_name="call_agent",
    rows=lambda agent: agent.delegates,
    mode=lambda modes: ToolMode.PROGRESSIVE,
    meta=call_agent_toolset,
    pin=False,
)
"""One tool, `call_agent`, in every mode; selected and profiled like any tool."""
SKILLS = Source(
    kind="skill",
    meta_name="read_skill",
    rows=lambda agent: agent.skills,
    mode=lambda modes: modes.skill,
    meta=lambda rows, b, query: read_skill_toolset(rows, b.skills if b else None),
    prompt=_skills_prompt,
)
"""Progressive: stubs in the prompt + `read_skill`. Inline: full content, no tool."""

SOURCES: tuple[Source, ...] = (CONNECTORS, DATABASES, MCP_SERVERS, DELEGATES, SKILLS)

step_connectors = CONNECTORS.part
step_databases = DATABASES.part
step_mcp = MCP_SERVERS.part
step_delegates = DELEGATES.part
step_skills = SKILLS.part
