"""The floor of an HTTP hop to an MCP server: the same upstream, no Quiver logic.

One process serves the tools of one stdio MCP server and forwards calls to one pooled stdio
session (opened at start-up, shared by every request), behind plain uvicorn: no auth, no
journal, no audit, no guards.
- `/mcp`: the SDK's low-level `Server` and `StreamableHTTPSessionManager` — the same server
  side Quiver's `/mcp/agents/{name}` is built on — forwarding `tools/call`;
- `POST /call`: a bare JSON route (`{"tool", "arguments"}` → the result's text), what Quiver's
  admin route `POST /mcp-servers/{id}/call` does without its auth, row lookup and checks.
With `--journal DSN` the MCP route also stores one row per call (the result, as JSON) in a table
of that Postgres database and commits it before it answers: the floor of a gateway that stores
what it answers (Quiver's endpoint journals each call's events and audit row in one statement).
What a client pays here, compared with calling the stdio server directly, is what the HTTP hop
alone costs; `bench.mcp_endpoint` measures Quiver's routes against both.

Run: `python -m bench.mcp_floor --port N <stdio command>` (`floor()` starts it as a subprocess).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.servers import ROOT, _stop, _wait_http, free_port

_JOURNAL = """CREATE TABLE IF NOT EXISTS floor_journal (
    id bigserial PRIMARY KEY, session uuid NOT NULL, seq int NOT NULL, data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(), UNIQUE (session, seq))"""


def build(command: str, journal: str | None = None) -> Any:
    """The ASGI app: `/mcp` forwards to one stdio session of `command`; `journal`: a Postgres
    DSN where every call's result is committed before it is answered."""
    upstream: dict[str, Client] = {}
    tools: list[types.Tool] = []
    stored: dict[str, Any] = {"session": uuid.uuid4(), "seq": 0}

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        result = await upstream["client"].call_tool(params.name, dict(params.arguments or {}))
        if journal is not None:
            stored["seq"] += 1
            row = (stored["session"], stored["seq"], result.model_dump_json(by_alias=True))
            await stored["conn"].execute(
                "INSERT INTO floor_journal (session, seq, data) VALUES ($1, $2, $3::jsonb)", *row
            )
        return result

    server: Server[Any] = Server(
        "floor", version="0", on_list_tools=list_tools, on_call_tool=call_tool
    )

    async def plain_call(request: Request) -> JSONResponse:
        body = await request.json()
        result = await upstream["client"].call_tool(body["tool"], body.get("arguments") or {})
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        return JSONResponse({"ok": not result.is_error, "output": text})

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        custom_starlette_routes=[Route("/call", plain_call, methods=["POST"])],
    )
    inner_lifespan = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[None]:
        target = StdioServerParameters(command=command, args=[])
        async with Client(target, mode="legacy", cache=None) as client, inner_lifespan(a):
            tools[:] = (await client.list_tools()).tools
            upstream["client"] = client
            if journal is None:
                yield
                return
            stored["conn"] = await asyncpg.connect(journal)
            try:
                await stored["conn"].execute(_JOURNAL)
                yield
            finally:
                await stored["conn"].close()

    app.router.lifespan_context = lifespan
    return app


@dataclass
class Floor:
    proc: subprocess.Popen[bytes]
    url: str
    """The MCP endpoint."""
    call_url: str
    """The plain JSON route."""


@contextlib.asynccontextmanager
async def floor(command: str, journal: str | None = None) -> AsyncIterator[Floor]:
    """The floor server in its own process (so its CPU is measured apart from the client's)."""
    port = free_port()
    cmd = [sys.executable, "-m", "bench.mcp_floor", "--port", str(port), command]
    if journal is not None:
        cmd += ["--journal", journal]
    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up only, returns at once
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await _wait_http(f"http://127.0.0.1:{port}/healthz", proc)  # any answer (404)
        base = f"http://127.0.0.1:{port}"
        yield Floor(proc=proc, url=f"{base}/mcp", call_url=f"{base}/call")
    finally:
        await asyncio.to_thread(_stop, proc)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--journal", help="a Postgres DSN: commit each call's result first")
    parser.add_argument("command")
    args = parser.parse_args()
    uvicorn.run(
        build(args.command, args.journal),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
