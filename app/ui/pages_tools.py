"""Trying a tool from the console: a connector action's Test, an MCP server's tool Call.

Both go through the admin test routes' services (the model's guards and executors) and show
`{ok, output, error, elapsed_ms}` on the page the form came from."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response

from app.connectors.execute import ConnectorExecutor
from app.connectors.schemas import ActionTestRequest
from app.connectors.service import connector_service
from app.db.row_cache import RowCache
from app.errors import Invalid
from app.kit.schemas import ToolCallResult
from app.kit.state import runtime_part
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.schemas import McpCallRequest
from app.mcp.service import mcp_server_service
from app.ui import sessions
from app.ui.deps import AdminFormDep
from app.ui.render import back

router = APIRouter(prefix="/ui", include_in_schema=False)
ExecutorDep = Annotated[ConnectorExecutor, Depends(runtime_part("connectors"))]
PoolDep = Annotated[McpPool, Depends(runtime_part("mcp"))]
ServersDep = Annotated[RowCache[McpServer], Depends(runtime_part("mcp_servers"))]
JsonText = Annotated[str, Form(max_length=100_000)]


def json_object(text: str, field: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise Invalid(f"{field}: not valid JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(value, dict):
        raise Invalid(f"{field}: must be a JSON object ({{...}})")
    return value


def shown(what: str, result: ToolCallResult) -> dict[str, Any]:
    return {"what": what, **result.model_dump()}


@router.post("/resources/connectors/{connector_id}/test")
async def try_action(
    connector_id: uuid.UUID,
    form: AdminFormDep,
    executor: ExecutorDep,
    action: Annotated[str, Form(min_length=1, max_length=256)],
    parameters: JsonText = "{}",
) -> Response:
    path = f"/ui/resources/connectors/{connector_id}"

    async def write() -> RedirectResponse:
        body = ActionTestRequest(parameters=json_object(parameters, "parameters"))
        result = await connector_service.test_action(
            form.session, connector_id, action, body, executor
        )
        sessions.remember(
            form.console,
            notice=f"{action}: {'ok' if result.ok else 'error'}",
            result=shown(action, result),
        )
        return back(path)

    return await form.submit(path, write)


@router.post("/resources/mcp/{server_id}/call")
async def call_tool(
    server_id: uuid.UUID,
    form: AdminFormDep,
    pool: PoolDep,
    servers: ServersDep,
    tool: Annotated[str, Form(min_length=1, max_length=256)],
    arguments: JsonText = "{}",
) -> Response:
    path = "/ui/resources#mcp"

    async def write() -> RedirectResponse:
        body = McpCallRequest(tool=tool, arguments=json_object(arguments, "arguments"))
        result = await mcp_server_service.test_call(server_id, body, pool, servers)
        sessions.remember(
            form.console,
            notice=f"{tool}: {'ok' if result.ok else 'error'}",
            result=shown(tool, result),
        )
        return back(path)

    return await form.submit("/ui/resources", write)
