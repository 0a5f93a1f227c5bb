"""The `mcp` meta-tool and the admin call route both take the tool's arguments as
`parameters` or `arguments` (the real `mcp-server-time` over stdio; the test MCP server over
streamable HTTP)."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.mcp.pool import McpPool
from app.pipeline.sources.meta_mcp import mcp_meta_toolset
from app.tools.base import CallContext
from tests.mcp.servers import TIME_SERVER, HttpMcpServer, url_row
from tests.mcp.test_admin_routes import admin_client

CTX = CallContext()


@pytest.mark.parametrize("word", ["parameters", "arguments"])
async def test_the_meta_tool_takes_either_word(
    pool: McpPool, http_server: HttpMcpServer, word: str
) -> None:
    row = url_row(http_server)
    row.tools_cache = await pool.list_tools(row)
    toolset = mcp_meta_toolset([row], pool)
    call = {"subcommand": "call", "server": row.name, "tool": "add", word: {"a": 2, "b": 3}}
    result = await toolset.call_tool("mcp", call, CTX)
    assert result.ok, result.error
    assert result.output.strip() == "5"


async def test_the_meta_tool_refuses_two_different_argument_sets(
    pool: McpPool, http_server: HttpMcpServer
) -> None:
    row = url_row(http_server)
    row.tools_cache = await pool.list_tools(row)
    toolset = mcp_meta_toolset([row], pool)
    both = {
        "subcommand": "call",
        "server": row.name,
        "tool": "add",
        "parameters": {"a": 1, "b": 1},
        "arguments": {"a": 2, "b": 2},
    }
    result = await toolset.call_tool("mcp", both, CTX)
    assert not result.ok
    assert result.error == (
        "Invalid arguments for 'mcp': give 'parameters' or 'arguments', not both"
    )


async def test_the_admin_call_route_takes_either_word(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    async with admin_client(settings, sessionmaker) as client:
        created = await client.post(
            "/api/v1/mcp-servers",
            json={"name": "time-words", "transport": "stdio", "command": TIME_SERVER},
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]
        assert (await client.post(f"/api/v1/mcp-servers/{sid}/refresh")).status_code == 200
        route = f"/api/v1/mcp-servers/{sid}/call"
        for word in ("arguments", "parameters"):
            call = await client.post(
                route, json={"tool": "get_current_time", word: {"timezone": "UTC"}}
            )
            assert call.status_code == 200, call.text
            assert call.json()["ok"] is True, call.json()
            assert "UTC" in call.json()["output"]
        both = await client.post(
            route,
            json={
                "tool": "get_current_time",
                "arguments": {"timezone": "UTC"},
                "parameters": {"timezone": "Europe/Paris"},
            },
        )
        assert both.status_code == 422
        assert "give 'arguments' or 'parameters', not both" in both.json()["detail"]
