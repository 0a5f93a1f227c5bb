"""What the tool pipeline calls to run an MCP tool (implemented by `pool.py`)."""

from __future__ import annotations

from typing import Any, Protocol

from app.mcp.models import McpServer
from app.tools.base import CallContext, ToolResult


class McpBackend(Protocol):
    async def call(
        self, server: McpServer, tool: str, arguments: dict[str, Any], ctx: CallContext
    ) -> ToolResult: ...
