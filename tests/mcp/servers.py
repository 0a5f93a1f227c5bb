"""Real MCP servers for tests and benchmarks: ours over HTTP in a thread, rows pointing at them."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import uvicorn

from app.mcp.models import McpServer
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
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

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
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._sock = sock
        self._port = self.port
        config = uvicorn.Config(
            app, log_config=None, log_level="critical", access_log=False,
            lifespan="on" if self.transport != "sse" else "off", ws="none",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, daemon=True,
            name=f"mcp-{self.transport}-{self.port}",
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("MCP test server failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = None
        self._sock = None

    async def astart(self) -> HttpMcpServer:
        return await asyncio.to_thread(self.start)

    async def astop(self) -> None:
        await asyncio.to_thread(self.stop)


def stdio_row(name: str = "ours", **kw: Any) -> McpServer:
    """Our server over stdio, as a transient row (explicit id: nothing is persisted)."""
    values: dict[str, Any] = {
        "id": uuid.uuid4(), "name": name, "transport": "stdio", "command": PYTHON,
        "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
        "env": {"PYTHONPATH": str(REPO)},
        "connect_timeout_s": 20.0, "call_timeout_s": 10.0, "tools_cache": [],
    }
    values.update(kw)
    return McpServer(**values)


def url_row(server: HttpMcpServer, name: str = "remote", **kw: Any) -> McpServer:
    values: dict[str, Any] = {
        "id": uuid.uuid4(), "name": name, "transport": server.transport, "url": server.url,
        "headers": {}, "connect_timeout_s": 10.0, "call_timeout_s": 10.0, "tools_cache": [],
    }
    values.update(kw)
    return McpServer(**values)
