"""What the tool pipeline calls to run read-only SQL (implemented by `query.py`)."""

from __future__ import annotations

from typing import Protocol

from app.databases.models import DatabaseConnector
from app.tools.base import CallContext, ToolResult


class DatabaseBackend(Protocol):
    async def query(
        self, database: DatabaseConnector, sql: str, ctx: CallContext
    ) -> ToolResult: ...
