from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Invalid
from app.kit.crud import CrudService
from app.mcp.models import McpServer
from app.mcp.repository import McpServerRepository
from app.mcp.schemas import McpServerCreate, McpServerUpdate, check_transport


class McpServerService(CrudService[McpServer]):
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


mcp_server_service = McpServerService()
