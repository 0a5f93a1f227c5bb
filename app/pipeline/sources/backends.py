"""The seam between meta-tools/legacy tools and the execution back-ends.

The pipeline builds tools from stored rows; when a tool runs it calls one of these.
Each back-end is implemented in its own domain package (connectors, databases, mcp)
and owned by the app lifespan.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from app.agents.backend import DelegationBackend
from app.audit.sink import ToolAuditBackend
from app.config import Settings
from app.connectors.backend import ConnectorBackend
from app.conventions.backend import ConventionBackend
from app.convert.pool import ConversionPool
from app.databases.backend import DatabaseBackend
from app.knowledge.backend import KnowledgeBackend
from app.mcp.backend import McpBackend
from app.pipeline.couse import CoUsePriors
from app.skills.backend import SkillFileBackend


@dataclass(frozen=True, kw_only=True)
class Backends:
    settings: Settings
    http: httpx.AsyncClient
    connectors: ConnectorBackend
    databases: DatabaseBackend
    mcp: McpBackend
    conventions: ConventionBackend
    tool_audit: ToolAuditBackend | None = None
    """The audit of every tool call a run makes."""
    knowledge: KnowledgeBackend | None = None
    """Search over knowledge bases (the `knowledge` tool); None answers that it is unavailable."""
    delegation: DelegationBackend | None = None
    """Runs `call_agent` as a child run (none: the tool answers that it cannot run here)."""
    converter: ConversionPool | None = None
    """The worker processes pages are parsed in (`http_fetch`); none: HTML is not converted."""
    skills: SkillFileBackend | None = None
    """The files of skill folders (`read_skill(name, path)`; none: only SKILL.md is readable)."""
    couse: CoUsePriors | None = None
    """Each agent's co-use prior from its past runs' tool calls (none: selection ranks alone).
    The one back-end built in the pipeline: a cache over the audit's `ToolHistory`."""
