"""The seam between meta-tools/legacy tools and the execution back-ends.

The pipeline builds tools from stored rows; when a tool runs it calls one of these.
Each back-end is implemented in its own domain package (connectors, databases, mcp)
and owned by the app lifespan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from app.audit.models import ToolCall
from app.config import Settings
from app.connectors.models import Connector, ConnectorAction
from app.databases.models import DatabaseConnector
from app.mcp.models import McpServer
from app.tools.base import CallContext, ToolResult


class ConnectorBackend(Protocol):
    async def execute(
        self,
        connector: Connector,
        action: ConnectorAction,
        arguments: dict[str, Any],
        ctx: CallContext,
    ) -> ToolResult: ...


class DatabaseBackend(Protocol):
    async def query(
        self, database: DatabaseConnector, sql: str, ctx: CallContext
    ) -> ToolResult: ...


class McpBackend(Protocol):
    async def call(
        self, server: McpServer, tool: str, arguments: dict[str, Any], ctx: CallContext
    ) -> ToolResult: ...


class ConventionBackend(Protocol):
    async def recall(
        self, *, query: str, limit: int, directory: str | None, scope: str | None
    ) -> ToolResult: ...


class ToolAuditBackend(Protocol):
    def record(self, row: ToolCall) -> None: ...


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
