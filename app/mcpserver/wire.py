"""The MCP endpoint's answers before the SDK sees a request: JSON error bodies, the body read
once and replayed, `initialize` params, JSON-RPC refusals (a bad `id`, the stateless revision).
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response
from starlette.types import Receive

from app.errors import error_body
from app.kit.request_guard import replay_body


def json_error(
    status: int, kind: str, detail: str, headers: dict[str, str] | None = None
) -> Response:
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return JSONResponse(error_body(kind, detail), status_code=status, headers=headers)


async def read_body(receive: Receive, limit: int) -> tuple[bytes, Receive]:
    """The request body (up to `limit` + 1 bytes), and a `receive` that replays it."""
    chunks: list[bytes] = []
    size = 0
    more = True
    while more and size <= limit:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        more = message.get("more_body", False)
    body = b"".join(chunks)
    return body, replay_body(body, receive, more_body=more)


def initialize_params(body: bytes) -> dict[str, Any] | None:
    """The params of an `initialize` request, else None."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    capabilities = params.get("capabilities")
    return params if isinstance(capabilities, dict) or capabilities is None else None


def jsonrpc_error(status: int, code: int, message: str) -> Response:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def invalid_id(body: bytes) -> Response | None:
    """-32600 for a request (or response) whose `id` is neither a string nor an integer: it is
    no notification, and the SDK would take it for one (202, never answered)."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return None  # the SDK answers the parse error
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict) or "id" not in message:
            continue
        ident = message["id"]
        if ("method" in message or "result" in message) and (
            isinstance(ident, bool) or not isinstance(ident, str | int)
        ):
            return jsonrpc_error(
                400, INVALID_REQUEST, "Invalid Request: 'id' must be a string or an integer"
            )
    return None


def protocol_refusal(requested: str) -> Response:
    """The stateless revision (2026-07-28: no `initialize`, no session) is answered the way
    that revision rejects a version: -32022 naming the versions served, so a client in the
    SDK's `auto` mode falls back to the `initialize` handshake and a client pinned to it gets
    a typed error. A session is what a run is here: what `request_tools` loaded and the
    client's elicitation (approvals) live in it."""
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": "Unsupported protocol version: this endpoint serves MCP sessions; "
            f"send initialize (protocol versions {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
            "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": requested},
        },
    }
    return Response(json.dumps(body), status_code=400, media_type="application/json")
