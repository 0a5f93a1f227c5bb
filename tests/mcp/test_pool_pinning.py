"""Remote MCP sessions connect only to the addresses the egress guard checked (DNS rebinding).

The resolver is ours: `socket.getaddrinfo` answers for one test name, first with the address
the guard should see and afterwards with another one. Everything else resolves normally.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.transport_security import TransportSecuritySettings

from app.config import Settings
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.tools.base import CallContext
from tests.fixtures.threaded_server import ThreadedServer
from tests.mcp.server_app import Counting, make_server

NAME = "rebind.quiver.test"
PUBLIC = "93.184.215.14"


class Resolver:
    """Answers `NAME` with `first`, then with `then`; counts the lookups of `NAME`."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first, then]
        self.lookups = 0
        self._real = socket.getaddrinfo

    def __call__(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name != NAME:
            return self._real(host, port, *args, **kwargs)
        address = self.answers[min(self.lookups, 1)]
        self.lookups += 1
        return self._real(address, port, *args, **kwargs)


class OpenMcpServer:
    """Our test MCP server on 127.0.0.1 accepting any Host header (the name is ours to pick)."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.counting: Counting | None = None
        self._http = ThreadedServer(f"mcp-open-{transport}")

    def start(self) -> OpenMcpServer:
        mcp, self.counting = make_server()
        open_hosts = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        if self.transport == "sse":
            self._http.start(mcp.sse_app(transport_security=open_hosts))
        else:
            app = mcp.streamable_http_app(transport_security=open_hosts)
            self._http.start(app, lifespan="on")
        return self

    def stop(self) -> None:
        self._http.stop()

    def row(self, host: str, *, connect_timeout_s: float = 10.0) -> McpServer:
        path = "sse" if self.transport == "sse" else "mcp"
        return McpServer(
            id=uuid.uuid4(),
            name="rebind",
            transport=self.transport,
            url=f"http://{host}:{self._http.port}/{path}",
            headers={},
            connect_timeout_s=connect_timeout_s,
            call_timeout_s=10.0,
            tools_cache=[],
        )


@pytest.fixture(scope="module", params=["sse", "streamable_http"])
def open_server(request: pytest.FixtureRequest) -> Iterator[OpenMcpServer]:
    server = OpenMcpServer(request.param).start()
    yield server
    server.stop()


def resolver(monkeypatch: pytest.MonkeyPatch, first: str, then: str) -> Resolver:
    fake = Resolver(first, then)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


async def test_a_name_rebound_to_loopback_after_the_check_is_never_reached(
    open_server: OpenMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked: a public address. Asked again: loopback, where our server listens. The session
    must go to the public address (unreachable here), never to the loopback server."""
    fake = resolver(monkeypatch, PUBLIC, "127.0.0.1")
    pool = McpPool(Settings(egress_allow_cidrs=[]), backoff_base_s=0.1, backoff_max_s=0.2)
    assert open_server.counting is not None
    before = open_server.counting.handshakes
    try:
        row = open_server.row(NAME, connect_timeout_s=2.0)
        result = await pool.call(row, "add", {"a": 1, "b": 2}, CallContext())
    finally:
        await pool.aclose()
    assert result.ok is False, result.output
    assert open_server.counting.handshakes == before, "the rebound loopback server was reached"
    assert fake.lookups == 1, "only the guard resolved the name"


async def test_the_session_uses_the_checked_address_by_name(
    open_server: OpenMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked: 127.0.0.1 (allowed for this test). Asked again: 127.0.0.2, where nothing
    listens. Every request of the session (handshake, list, calls) reaches the checked one."""
    fake = resolver(monkeypatch, "127.0.0.1", "127.0.0.2")
    pool = McpPool(Settings(egress_allow_cidrs=["127.0.0.1/32"]))
    assert open_server.counting is not None
    before = open_server.counting.handshakes
    try:
        row = open_server.row(NAME)
        tools = await pool.list_tools(row)
        first = await pool.call(row, "add", {"a": 1, "b": 2}, CallContext())
        second = await pool.call(row, "echo", {"text": "pinned"}, CallContext())
    finally:
        await pool.aclose()
    assert "add" in {t["name"] for t in tools}
    assert first.ok, first.output
    assert "3" in first.output
    assert second.ok, second.output
    assert "pinned" in second.output
    assert open_server.counting.handshakes == before + 1
    assert fake.lookups == 1, "only the guard resolved the name"
