from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import update

from app.db.base import utcnow
from app.kit.repository import RepositoryBase
from app.mcp.models import McpServer


class McpServerRepository(RepositoryBase[McpServer]):
    model = McpServer

    async def store_tools(self, server_id: uuid.UUID, tools: list[dict[str, Any]]) -> None:
        """Replace a server's cached tool list (a refresh or a `list_changed` notification)."""
        await self.session.execute(
            update(McpServer)
            .where(McpServer.id == server_id)
            .values(tools_cache=tools, tools_refreshed_at=utcnow())
        )
