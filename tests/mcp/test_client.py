"""`ServerSpec` and safe error text (no secrets, no internals)."""

from __future__ import annotations

import uuid

import httpx2
from mcp.shared.exceptions import MCPError

from app.mcp.client import ServerSpec, describe_error
from app.mcp.models import McpServer

TOKEN = "tok-abcdef-123456"


def _row(**kw: object) -> McpServer:
    values: dict[str, object] = {
        "id": uuid.uuid4(),
        "name": "gh",
        "transport": "streamable_http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "env": {"API_KEY": "env-secret-999"},
        "connect_timeout_s": 5.0,
        "call_timeout_s": 30.0,
    }
    values.update(kw)
    return McpServer(**values)


def test_error_text_masks_header_and_env_values() -> None:
    spec = ServerSpec.from_row(_row())
    leaked = MCPError(code=-32000, message=f"auth failed for Bearer {TOKEN} / env-secret-999")
    text = describe_error(leaked, spec)
    assert TOKEN not in text
    assert "env-secret-999" not in text
    assert text.startswith("auth failed")


def test_error_text_unwraps_exception_groups_and_names_http_status() -> None:
    spec = ServerSpec.from_row(_row())
    request = httpx2.Request("GET", f"https://mcp.example.com/mcp?token={TOKEN}")
    response = httpx2.Response(403, request=request)
    error = httpx2.HTTPStatusError(f"403 for {request.url}", request=request, response=response)
    text = describe_error(ExceptionGroup("task group", [error]), spec)
    assert text == "HTTP 403 from the server"


def test_fingerprint_follows_connection_settings_only() -> None:
    base = ServerSpec.from_row(_row())
    assert ServerSpec.from_row(_row(call_timeout_s=99.0)).fingerprint == base.fingerprint
    assert ServerSpec.from_row(_row(headers={"Authorization": "Bearer other"})).fingerprint != (
        base.fingerprint
    )
    assert ServerSpec.from_row(_row(url="https://mcp.example.com/v2")).fingerprint != (
        base.fingerprint
    )
