"""Safety of `McpPool`: the stdio allow-list, the child's environment, egress and secrets."""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.config import Settings
from app.mcp.client import McpConfigError, check_stdio_command
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.tools.base import CallContext
from tests.mcp.servers import TIME_SERVER, HttpMcpServer, stdio_row, url_row

CTX = CallContext()
GATEWAY_SECRET = "sk-gateway-llm-key-do-not-leak"
HEADER_SECRET = "hdr-secret-0123456789abcdef"


class EchoUnauthorized:
    """A plain HTTP endpoint answering 401 with the request's Authorization header in the body."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        app = Starlette(routes=[Route("/mcp", self._handle, methods=["GET", "POST", "DELETE"])])
        config = uvicorn.Config(app, log_config=None, log_level="critical", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"

    async def _handle(self, request: Request) -> PlainTextResponse:
        auth = request.headers.get("authorization", "")
        self.seen.append(auth)
        return PlainTextResponse(f"bad credentials: {auth}", status_code=401)

    def __enter__(self) -> EchoUnauthorized:
        self._thread.start()
        while not self._server.started:
            time.sleep(0.005)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


@pytest.fixture
def echo_401() -> Iterator[EchoUnauthorized]:
    with EchoUnauthorized() as server:
        yield server


def test_allow_list_matches_the_exact_command_not_its_basename() -> None:
    check_stdio_command("uvx", ["uvx"])
    check_stdio_command("/usr/bin/../bin/python3", ["/usr/bin/python3"])
    with pytest.raises(McpConfigError, match="not on the allow-list"):
        check_stdio_command("/tmp/evil/uvx", ["uvx"])
    with pytest.raises(McpConfigError, match="not on the allow-list"):
        check_stdio_command("python3", ["/usr/bin/python3"])
    with pytest.raises(McpConfigError, match="disabled"):
        check_stdio_command("uvx", [])


async def test_stdio_command_not_on_the_allow_list_is_refused(pool: McpPool) -> None:
    row = stdio_row("shell", command="/bin/sh", args=["-c", "echo pwned > /tmp/pwned"])
    result = await pool.call(row, "anything", {}, CTX)
    assert not result.ok
    assert not result.retryable
    assert "'/bin/sh' is not on the allow-list" in (result.error or "")
    assert pool.connects == 0


async def test_stdio_is_off_when_the_allow_list_is_empty() -> None:
    pool = McpPool(Settings())
    try:
        result = await pool.call(stdio_row(), "add", {"a": 1, "b": 1}, CTX)
    finally:
        await pool.aclose()
    assert not result.ok
    assert "QUIVER_MCP_STDIO_COMMANDS" in (result.error or "")


async def test_child_process_gets_its_env_and_no_gateway_secret(
    pool: McpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUIVER_LLM_API_KEY", GATEWAY_SECRET)
    monkeypatch.setenv("QUIVER_ADMIN_TOKEN", GATEWAY_SECRET + "-admin")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", GATEWAY_SECRET + "-aws")
    row = stdio_row()
    row.env = {**(row.env or {}), "GITHUB_TOKEN": "ghp_child_only_token"}
    result = await pool.call(row, "env", {}, CTX)
    assert result.ok, result.error
    env = json.loads(result.output)
    assert env["GITHUB_TOKEN"] == "ghp_child_only_token"
    assert "PATH" in env
    assert not [k for k in env if k.startswith("QUIVER_")]
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert GATEWAY_SECRET not in result.output


async def test_remote_url_outside_the_egress_allow_list_is_refused(
    http_server: HttpMcpServer,
) -> None:
    pool = McpPool(Settings())
    before = http_server.handshakes
    try:
        result = await pool.call(url_row(http_server), "add", {"a": 1, "b": 1}, CTX)
    finally:
        await pool.aclose()
    assert not result.ok
    assert not result.retryable
    assert "Egress blocked" in (result.error or "")
    assert http_server.handshakes == before


@pytest.mark.parametrize("transport", ["streamable_http", "sse"])
async def test_secret_headers_are_sent_but_never_shown_in_errors(
    pool: McpPool, echo_401: EchoUnauthorized, transport: str
) -> None:
    headers = {"Authorization": f"Bearer {HEADER_SECRET}", "X-Api-Key": HEADER_SECRET}
    row = McpServer(
        id=uuid.uuid4(),
        name="authz",
        transport=transport,
        url=echo_401.url,
        headers=headers,
        # generous: the 401 comes at once; late in a loaded suite this process has stalled
        # for seconds (a full collection of earlier tests' leftovers), past a 5 s connect
        connect_timeout_s=30.0,
        call_timeout_s=30.0,
        tools_cache=[],
    )
    result = await pool.call(row, "add", {"a": 1, "b": 1}, CTX)
    assert echo_401.seen, result.error
    assert echo_401.seen[0] == f"Bearer {HEADER_SECRET}"
    assert not result.ok
    assert "cannot connect to MCP server 'authz'" in (result.error or "")
    assert HEADER_SECRET not in (result.error or "")


async def test_mcp_server_time_over_stdio(pool: McpPool) -> None:
    row = stdio_row("time", command=TIME_SERVER, args=[], env={})
    names = {t["name"] for t in await pool.list_tools(row)}
    assert {"get_current_time", "convert_time"} <= names
    result = await pool.call(row, "get_current_time", {"timezone": "UTC"}, CTX)
    assert result.ok, result.error
    assert json.loads(result.output)["timezone"] == "UTC"
    bad = await pool.call(row, "get_current_time", {"timezone": "Mars/Olympus"}, CTX)
    assert not bad.ok
    assert pool.connects == 1
