"""Fixtures: real MCP servers (ours over stdio/SSE/streamable HTTP, and `mcp-server-time`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from app.config import Settings
from app.mcp.pool import McpPool
from tests.mcp.servers import (
    PYTHON,
    REPO,
    TIME_SERVER,
    HttpMcpServer,
    stdio_row,
    url_row,
)

__all__ = ["PYTHON", "REPO", "TIME_SERVER", "HttpMcpServer", "stdio_row", "url_row"]


@pytest.fixture
def mcp_settings() -> Settings:
    return Settings(
        mcp_stdio_commands=[PYTHON, TIME_SERVER],
        egress_allow_cidrs=["127.0.0.0/8"],
        mcp_tools_ttl_s=3600,
    )


@pytest.fixture
async def pool(mcp_settings: Settings) -> AsyncIterator[McpPool]:
    p = McpPool(mcp_settings, backoff_base_s=0.3, backoff_max_s=2.0)
    yield p
    await p.aclose()


@pytest.fixture(scope="module")
def sse_server() -> Iterator[HttpMcpServer]:
    server = HttpMcpServer("sse").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http_server() -> Iterator[HttpMcpServer]:
    server = HttpMcpServer("streamable_http").start()
    yield server
    server.stop()
