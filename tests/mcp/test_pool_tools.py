"""Tool lists through `McpPool`: on demand, on `list_changed` (both protocol eras) and on TTL."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.config import Settings
from app.errors import Invalid, Unavailable
from app.mcp.pool import McpPool
from app.tools.base import CallContext
from tests.mcp.servers import HttpMcpServer, stdio_row, url_row

CTX = CallContext()


class HookRecorder:
    """An `on_tools_changed` hook that records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[uuid.UUID, list[dict[str, Any]]]] = []
        self._changed = asyncio.Condition()

    async def __call__(self, server_id: uuid.UUID, tools: list[dict[str, Any]]) -> None:
        async with self._changed:
            self.calls.append((server_id, tools))
            self._changed.notify_all()

    async def wait_for_tool(self, name: str) -> list[dict[str, Any]]:
        def found() -> list[dict[str, Any]] | None:
            for _, tools in reversed(self.calls):
                if any(t["name"] == name for t in tools):
                    return tools
            return None

        async with asyncio.timeout(10.0), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        tools = found()
        assert tools is not None
        return tools


@pytest.fixture
async def legacy_server(request: pytest.FixtureRequest) -> AsyncIterator[HttpMcpServer]:
    server = await HttpMcpServer(request.param, legacy=True).astart()
    yield server
    await server.astop()


async def test_list_tools_returns_names_descriptions_and_schemas(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    tools = await pool.list_tools(url_row(http_server))
    by_name = {t["name"]: t for t in tools}
    assert by_name["add"]["description"] == "Add two integers."
    assert by_name["add"]["input_schema"]["required"] == ["a", "b"]
    assert by_name["add"]["input_schema"]["properties"]["a"]["type"] == "integer"
    assert set(by_name["echo"]) == {"name", "description", "input_schema"}
    # published as HTML (LOOKUP_HTML), stored as plain text with links as text
    assert by_name["lookup"]["description"] == (
        "Look up a customer by its id & return it.\n\n"
        "- Cached for 60 s.\n- Deleted customers are not found."
    )


@pytest.mark.parametrize("kind", ["sse", "http"])
async def test_list_changed_refreshes_the_cache_and_calls_the_hook(
    pool: McpPool, kind: str, sse_server: HttpMcpServer, http_server: HttpMcpServer
) -> None:
    hook = HookRecorder()
    pool.on_tools_changed = hook
    row = url_row(sse_server if kind == "sse" else http_server)
    new_tool = f"added_{kind}_{uuid.uuid4().hex[:6]}"
    result = await pool.call(row, "grow", {"tool_name": new_tool}, CTX)
    assert result.ok
    tools = await hook.wait_for_tool(new_tool)
    assert all(server_id == row.id for server_id, _ in hook.calls)
    assert {"add", new_tool} <= {t["name"] for t in tools}
    cached = pool.cached_tools(row.id)
    assert cached is not None
    assert new_tool in {t["name"] for t in cached}
    assert (await pool.call(row, new_tool, {}, CTX)).output == f"I am {new_tool}"


# Streamable HTTP only: over SSE the server locks a connection to the 2026 era once it has
# seen `server/discover`, so the probe refusal below cannot force the fallback there.
@pytest.mark.parametrize("legacy_server", ["streamable_http"], indirect=True)
async def test_list_changed_notification_on_a_handshake_era_server(
    pool: McpPool, legacy_server: HttpMcpServer
) -> None:
    hook = HookRecorder()
    pool.on_tools_changed = hook
    row = url_row(legacy_server)
    stats = json.loads((await pool.call(row, "stats", {}, CTX)).output)
    assert stats["protocol"] == "2025-11-25"
    assert (await pool.call(row, "grow", {"tool_name": "late_tool"}, CTX)).ok
    await hook.wait_for_tool("late_tool")
    assert legacy_server.counting is not None
    assert legacy_server.counting.methods["initialize"] == 1


async def test_stale_tool_cache_is_refreshed_after_a_call_and_fresh_one_is_not(
    http_server: HttpMcpServer,
) -> None:
    pool = McpPool(Settings(egress_allow_cidrs=["127.0.0.0/8"], mcp_tools_ttl_s=600))
    hook = HookRecorder()
    pool.on_tools_changed = hook
    now = datetime.now(UTC)
    fresh = url_row(http_server, "fresh", tools_refreshed_at=now - timedelta(seconds=60))
    stale = url_row(http_server, "stale", tools_refreshed_at=now - timedelta(hours=2))
    try:
        assert (await pool.call(fresh, "add", {"a": 1, "b": 1}, CTX)).ok
        assert (await pool.call(stale, "add", {"a": 1, "b": 1}, CTX)).ok
        await hook.wait_for_tool("add")
        await asyncio.sleep(0.3)  # give a wrongly scheduled refresh of `fresh` time to land
        assert [server_id for server_id, _ in hook.calls] == [stale.id]
        for _ in range(5):  # refreshed once per TTL, not on every call
            assert (await pool.call(stale, "add", {"a": 1, "b": 1}, CTX)).ok
        await asyncio.sleep(0.3)
        assert len(hook.calls) == 1
    finally:
        await pool.aclose()


async def test_list_tools_for_a_refused_stdio_command_raises_invalid(pool: McpPool) -> None:
    with pytest.raises(Invalid, match="allow-list"):
        await pool.list_tools(stdio_row(command="/bin/sh", args=["-c", "true"]))


async def test_list_tools_for_an_unreachable_server_raises_unavailable(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server, url="http://127.0.0.1:9/mcp", connect_timeout_s=2.0)
    with pytest.raises(Unavailable, match="cannot connect"):
        await pool.list_tools(row)


async def test_a_lost_change_subscription_is_reopened(pool: McpPool) -> None:
    server = await HttpMcpServer("streamable_http").astart()
    hook = HookRecorder()
    pool.on_tools_changed = hook
    row = url_row(server)
    try:
        assert (await pool.call(row, "add", {"a": 1, "b": 1}, CTX)).ok
        await hook.wait_for_tool("add")  # the first-call refresh
        port = server.port
        await server.astop()  # drops the open `subscriptions/listen` stream
        server = await HttpMcpServer("streamable_http", port=port).astart()
        await asyncio.sleep(1.5)  # the re-listen backoff starts at 1s
        assert (await pool.call(row, "grow", {"tool_name": "after_restart"}, CTX)).ok
        await hook.wait_for_tool("after_restart")
        assert pool.connects == 1
    finally:
        await server.astop()


async def test_list_tools_reconnects_once_when_the_session_expired(pool: McpPool) -> None:
    server = await HttpMcpServer("streamable_http", legacy=True).astart()
    row = url_row(server)
    try:
        assert {t["name"] for t in await pool.list_tools(row)} >= {"add", "echo"}
        port = server.port
        await server.astop()
        server = await HttpMcpServer("streamable_http", port=port, legacy=True).astart()
        assert {t["name"] for t in await pool.list_tools(row)} >= {"add", "echo"}
        assert pool.connects == 2
    finally:
        await server.astop()
