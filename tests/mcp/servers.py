"""Real MCP servers for tests and benchmarks: ours over HTTP in a thread, rows pointing at them."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

from app.mcp.models import McpServer
from tests.fixtures.threaded_server import ThreadedServer
from tests.mcp.server_app import Counting, make_server

PYTHON = sys.executable
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
REPO = Path(__file__).resolve().parents[2]


class HttpMcpServer:
    """Our test MCP server as an ASGI app under uvicorn in a daemon thread on 127.0.0.1."""

    def __init__(self, transport: str, *, port: int = 0, legacy: bool = False) -> None:
        self.transport = transport
        self.legacy = legacy
        self.counting: Counting | None = None
        self._port = port
        self._http = ThreadedServer(f"mcp-{transport}")

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        path = "/sse" if self.transport == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    @property
    def handshakes(self) -> int:
        assert self.counting is not None
        return self.counting.handshakes

    def start(self) -> HttpMcpServer:
        mcp, self.counting = make_server(legacy=self.legacy)
        app = mcp.sse_app() if self.transport == "sse" else mcp.streamable_http_app()
        self._http.start(app, port=self._port, lifespan="on" if self.transport != "sse" else "off")
        self._port = self.port
        return self

    def stop(self) -> None:
        self._http.stop()

    async def astart(self) -> HttpMcpServer:
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)


def stdio_row(name: str = "ours", **kw: Any) -> McpServer:
    """Our server over stdio, as a transient row (explicit id: nothing is persisted)."""
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "name": name,
        "transport": "stdio",
        "command": PYTHON,
        "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
        "env": {"PYTHONPATH": str(REPO)},
        "connect_timeout_s": 20.0,
        "call_timeout_s": 10.0,
        "tools_cache": [],
    }
    values.update(kw)
    return McpServer(**values)


def url_row(server: HttpMcpServer, name: str = "remote", **kw: Any) -> McpServer:
    values: dict[str, Any] = {
        "id": uuid.uuid4(),
        "name": name,
        "transport": server.transport,
        "url": server.url,
        "headers": {},
        "connect_timeout_s": 10.0,
        "call_timeout_s": 10.0,
        "tools_cache": [],
    }
    values.update(kw)
    return McpServer(**values)
