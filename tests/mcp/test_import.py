"""`POST /mcp-servers/import`: the configuration documents of Claude Desktop, Cursor and
VS Code, with real servers (`mcp-server-time` over stdio, `@modelcontextprotocol/server-everything`
from npm over stdio, our test server over streamable HTTP and SSE on 127.0.0.1). A created
server's tools are listed at once: the agent's tool set shows them without a refresh."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.crud import assert_error
from tests.mcp.servers import REPO, TIME_SERVER, HttpMcpServer

IMPORT = "/api/v1/mcp-servers/import"
EVERYTHING = REPO / "tests" / "npm" / "node_modules" / ".bin" / "mcp-server-everything"


def everything_command() -> str:
    assert EVERYTHING.exists(), "run `make npm` (npm ci --prefix tests/npm) first"
    return str(EVERYTHING)


@contextlib.asynccontextmanager
async def importer(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], **update: Any
) -> AsyncIterator[httpx.AsyncClient]:
    configured = settings.model_copy(update=update)
    app = create_app(configured, sessionmaker=sessionmaker)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=120,
        ) as client,
    ):
        yield client


def by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in body["servers"]}


async def test_a_claude_desktop_document_creates_each_server(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    http_server: HttpMcpServer,
    sse_server: HttpMcpServer,
) -> None:
    document = {
        "mcpServers": {
            "time": {"command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
            "everything": {"command": everything_command(), "args": ["stdio"]},
            "Remote Test": {"url": http_server.url, "headers": {"X-Token": "hdr-secret-1234"}},
            "events": {"url": sse_server.url},
            "shell": {"command": "/bin/sh", "args": ["-c", "id"], "disabled": False},
        }
    }
    async with importer(
        settings,
        sessionmaker,
        mcp_stdio_commands=[TIME_SERVER, everything_command()],
        egress_allow_cidrs=["127.0.0.0/8"],
    ) as client:
        resp = await client.post(IMPORT, json=document)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert (body["created"], body["failed"]) == (4, 1)
        results = by_name(body)
        assert list(results) == list(document["mcpServers"])
        time = results["time"]["server"]
        assert (time["transport"], time["args"]) == ("stdio", ["--local-timezone", "UTC"])
        assert "get_current_time" in {t["name"] for t in time["tools"]}
        everything = {t["name"] for t in results["everything"]["server"]["tools"]}
        assert {"echo", "get-resource-links"} <= everything
        remote = results["Remote Test"]
        assert remote["warnings"] == ["stored as 'remote-test'"]
        assert remote["server"]["name"] == "remote-test"
        assert remote["server"]["transport"] == "streamable_http"
        assert remote["server"]["headers"] == {"X-Token": "***"}
        assert {"add", "echo"} <= {t["name"] for t in remote["server"]["tools"]}
        assert results["events"]["server"]["transport"] == "sse"
        assert results["events"]["server"]["tools"]
        shell = results["shell"]
        assert (shell["status"], shell["server"]) == ("failed", None)
        assert shell["error"]["error"] == "Invalid"
        assert "'/bin/sh' is not on the allow-list" in shell["error"]["detail"]
        assert "QUIVER_MCP_STDIO_COMMANDS" in shell["error"]["detail"]
        assert "hdr-secret-1234" not in resp.text

        listed = (await client.get("/api/v1/mcp-servers")).json()
        assert sorted(s["name"] for s in listed["items"]) == [
            "events",
            "everything",
            "remote-test",
            "time",
        ]
        # a chat sees the tools with no refresh: the agent's tool set lists them
        agent = await client.post(
            "/api/v1/agents",
            json={
                "name": "imported",
                "mcp_server_ids": [time["id"]],
                "model_config_json": {"mcp_tool_mode": "legacy"},
            },
        )
        assert agent.status_code == 201, agent.text
        toolset = (await client.get(f"/api/v1/agents/{agent.json()['id']}/toolset")).json()
        names = {t["function"]["name"] for t in toolset["tools"]}
        assert any("get_current_time" in name for name in names), names

        again = await client.post(
            IMPORT, json={"mcpServers": {"time": document["mcpServers"]["time"]}}
        )
        assert again.status_code == 200
        (dup,) = again.json()["servers"]
        assert dup["error"]["error"] == "Conflict"
        assert "time" in dup["error"]["detail"]


async def test_a_vs_code_document_and_an_unreachable_server(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession], http_server: HttpMcpServer
) -> None:
    document = {
        "inputs": [{"type": "promptString", "id": "token", "password": True}],
        "servers": {
            "local": {"type": "http", "url": http_server.url, "headers": {"A": "${input:token}"}},
            "clock": {"type": "stdio", "command": "mcp-server-time", "envFile": ".env"},
            "odd": {"type": "websocket", "url": "ws://x"},
            "broken": "not an object",
        },
    }
    async with importer(settings, sessionmaker, mcp_stdio_commands=["mcp-server-time"]) as client:
        resp = await client.post(IMPORT, json=document)
        assert resp.status_code == 200, resp.text
        results = by_name(resp.json())
        local = results["local"]
        # loopback is refused without QUIVER_EGRESS_ALLOW_CIDRS: created, with the reason
        assert local["status"] == "created"
        assert local["server"]["tools"] == []
        error = local["server"]["tools_error"]
        assert "Egress blocked: 127.0.0.1 (loopback)" in error
        assert "add 127.0.0.1/32 to QUIVER_EGRESS_ALLOW_CIDRS" in error
        assert any("placeholders" in w for w in local["warnings"])
        clock = results["clock"]
        assert clock["status"] == "created"
        assert "get_current_time" in {t["name"] for t in clock["server"]["tools"]}
        assert clock["warnings"] == ["ignored: envFile (not supported by Quiver)"]
        assert results["odd"]["error"]["error"] == "Invalid"
        assert "websocket" in results["odd"]["error"]["detail"]
        assert results["broken"]["status"] == "failed"
        # the VS Code settings.json layout: under "mcp"
        nested = {"mcp": {"servers": {"clock2": {"command": "mcp-server-time"}}}}
        resp = await client.post(IMPORT, json=nested)
        assert resp.json()["created"] == 1


@pytest.mark.parametrize(
    ("document", "mentions"),
    [
        ({}, ["mcpServers", "servers"]),
        ({"mcpServers": {}}, ["no servers"]),
        ({"mcpServers": ["time"]}, ["mcpServers"]),
        ({"servers": None}, ["servers"]),
    ],
)
async def test_a_document_without_servers_is_422(
    client: httpx.AsyncClient, document: dict[str, Any], mentions: list[str]
) -> None:
    assert_error(await client.post(IMPORT, json=document), 422, "Invalid", mentions=mentions)
    assert (await client.get("/api/v1/mcp-servers")).json()["total"] == 0


async def test_a_body_that_is_not_an_object_is_422(client: httpx.AsyncClient) -> None:
    assert_error(await client.post(IMPORT, json=["time"]), 422, "Invalid")
    assert_error(
        await client.post(IMPORT, content=b"{", headers={"content-type": "application/json"}),
        422,
        "Invalid",
    )
