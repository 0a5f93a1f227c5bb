from __future__ import annotations

from app.kit.repository import RepositoryBase
from app.mcp.models import McpServer


class McpServerRepository(RepositoryBase[McpServer]):
    model = McpServer
