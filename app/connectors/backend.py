"""What the tool pipeline calls to run a connector action (implemented by `execute.py`)."""

from __future__ import annotations

from typing import Any, Protocol

from app.connectors.models import Connector, ConnectorAction
from app.tools.base import CallContext, ToolResult


class ConnectorBackend(Protocol):
    async def execute(
        self,
        connector: Connector,
        action: ConnectorAction,
        arguments: dict[str, Any],
        ctx: CallContext,
    ) -> ToolResult: ...
