from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.tombstones import RemembersDeleted
from app.db.base import utcnow
from app.db.row_cache import RowCache
from app.errors import Invalid, NotFound
from app.kit.crud import CrudService
from app.kit.schemas import ToolCallResult
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.repository import McpServerRepository
from app.mcp.schemas import McpCallRequest, McpServerCreate, McpServerUpdate, check_transport
from app.tools.base import CallContext
from app.tools.suggest import unknown_name
from app.tools.timing import timed_tool_call
from app.tools.validation import invalid_arguments, validate_arguments


class McpServerService(RemembersDeleted, CrudService[McpServer]):
    history_kind = "mcp"
    repository = McpServerRepository
    label = "MCP server"

    async def create(self, session: AsyncSession, data: McpServerCreate) -> McpServer:
        await self.ensure_name_free(session, data.name)
        return await self.save(session, McpServer(**data.model_dump()))

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: McpServerUpdate
    ) -> McpServer:
        server = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        changed = self.apply(server, data)
        try:
            check_transport(server.transport, command=server.command, url=server.url)
        except ValueError as exc:
            raise Invalid(str(exc)) from exc
        if changed & {"transport", "command", "args", "env", "url", "headers"}:
            server.tools_cache = []
            server.tools_refreshed_at = None
        return await self.save(session, server)

    async def refresh(self, session: AsyncSession, id: uuid.UUID, pool: McpPool) -> McpServer:
        """Connect (or reuse the session), list the tools and store them on the row."""
        server = await self.get(session, id)
        server.tools_cache = await pool.list_tools(server)
        server.tools_refreshed_at = utcnow()
        return await self.save(session, server)

    async def test_call(
        self,
        id: uuid.UUID,
        data: McpCallRequest,
        pool: McpPool,
        servers: RowCache[McpServer],
    ) -> ToolCallResult:
        """Call one tool as the model's `mcp call` would: arguments checked against its schema.
        The server's row comes from `servers` (a warm call opens no session)."""
        server = await servers.get(id)
        if server is None:
            raise NotFound(f"{self.label} {str(id)!r} not found")
        known = {t.get("name"): t for t in server.tools_cache or []}
        tool = known.get(data.tool)
        if known and tool is None:
            return ToolCallResult(
                ok=False,
                output="",
                elapsed_ms=0.0,
                error=unknown_name("tool", data.tool, list(known)),
            )
        problem = (
            validate_arguments(tool.get("input_schema") or {}, data.arguments) if tool else None
        )
        if problem:
            return ToolCallResult(
                ok=False, output="", elapsed_ms=0.0, error=invalid_arguments(data.tool, problem)
            )
        return await timed_tool_call(pool.call(server, data.tool, data.arguments, CallContext()))


mcp_server_service = McpServerService()
