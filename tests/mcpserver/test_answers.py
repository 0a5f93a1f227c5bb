"""How the endpoint answers a `tools/call`, and who may go on with a session, on both stores.

A call answered by its result alone is one JSON body; a call still running after
`JSON_WAIT_S` streams (SSE) as the SDK always did, its result the stream's last event
(`app/mcpserver/transport.py`). On SQLite a session held by the process is admitted without
reading its run; it must still refuse another key, an ended session and an unknown one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.server._otel import OpenTelemetryMiddleware as SdkSpan
from starlette.routing import Mount

from app.config import Settings
from app.main import create_app
from app.mcpserver.endpoint import McpEndpoint
from app.mcpserver.transport import JSON_WAIT_S
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.served import INITIALIZE
from tests.mcp.servers import HttpMcpServer
from tests.mcpserver.test_endpoint import MCP_HEADERS, make_key, post, unique

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def base_url(served: tuple[str, Settings]) -> str:
    return served[0]


async def legacy_agent(admin: httpx.AsyncClient, upstream: HttpMcpServer) -> tuple[str, str]:
    """An agent calling the test server's tools by name; (agent name, tool-name prefix)."""
    server = await post(
        admin,
        "mcp-servers",
        {"name": unique("tools"), "transport": "streamable_http", "url": upstream.url},
    )
    refreshed = await admin.post(f"/api/v1/mcp-servers/{server['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    agent = await post(
        admin,
        "agents",
        {
            "name": unique("answers"),
            "mcp_server_ids": [server["id"]],
            # every tool offered by name (none deferred behind `request_tools`)
            "model_config_json": {"mcp_tool_mode": "legacy", "tool_selection_threshold": 50},
        },
    )
    listed = (await admin.get(f"/api/v1/agents/{agent['id']}/toolset")).json()
    (echo,) = [
        t["function"]["name"] for t in listed["tools"] if t["function"]["name"].endswith("echo")
    ]
    return agent["name"], echo.removesuffix("echo")


async def opened(http: httpx.AsyncClient, path: str, key: str = ADMIN_TOKEN) -> dict[str, str]:
    """Open a session by hand; the headers every later request of it sends."""
    auth = {"Authorization": f"Bearer {key}"}
    response = await http.post(path, json=INITIALIZE, headers=MCP_HEADERS | auth)
    assert response.status_code == 200, response.text
    session = MCP_HEADERS | auth
    session |= {"Mcp-Session-Id": response.headers["mcp-session-id"]}
    session |= {"Mcp-Protocol-Version": "2025-06-18"}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(path, json=done, headers=session)).status_code == 202
    return session


def call(ident: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def sse_messages(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


async def test_a_quick_call_answers_json_and_a_slow_one_streams(
    base_url: str, upstream: HttpMcpServer
) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as http:
        agent, prefix = await legacy_agent(http, upstream)
        path = f"/mcp/agents/{agent}"
        session = await opened(http, path)

        quick = await http.post(
            path, json=call(2, f"{prefix}echo", {"text": "hi"}), headers=session
        )
        assert quick.status_code == 200, quick.text
        assert quick.headers["content-type"] == "application/json"
        assert quick.headers["mcp-session-id"] == session["Mcp-Session-Id"]
        answer = quick.json()
        assert answer["id"] == 2
        assert answer["result"]["content"][0]["text"] == "hi"

        seconds = JSON_WAIT_S + 0.5
        slow = await http.post(
            path, json=call(3, f"{prefix}slow", {"seconds": seconds}), headers=session
        )
        assert slow.status_code == 200, slow.text
        assert slow.headers["content-type"].startswith("text/event-stream")
        (streamed,) = sse_messages(slow.text)
        assert streamed["id"] == 3
        assert streamed["result"]["content"][0]["text"] == f"slept {seconds}"

        unknown = await http.post(path, json=call(4, "no_such_tool", {}), headers=session)
        assert unknown.headers["content-type"] == "application/json"
        assert unknown.json()["result"]["isError"] is True


async def test_a_session_refuses_another_key_and_ends_for_good(
    base_url: str, upstream: HttpMcpServer
) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as http:
        agent, prefix = await legacy_agent(http, upstream)
        path = f"/mcp/agents/{agent}"
        session = await opened(http, path)
        echo = call(2, f"{prefix}echo", {"text": "again"})
        for _ in range(3):  # served from what the process holds
            answered = await http.post(path, json=echo, headers=session)
            assert answered.status_code == 200, answered.text

        other = await make_key(http)
        stolen = session | {"Authorization": f"Bearer {other}"}
        refused = await http.post(path, json=echo, headers=stolen)
        assert refused.status_code == 404, refused.text

        made_up = session | {"Mcp-Session-Id": "0" * 32}
        assert (await http.post(path, json=echo, headers=made_up)).status_code == 404

        assert (await http.delete(path, headers=session)).status_code == 200
        ended = await http.post(path, json=echo, headers=session)
        assert ended.status_code == 404, ended.text
        runs = (await http.get("/api/v1/runs")).json()["items"]
        (run,) = [r for r in runs if r["id"].replace("-", "") == session["Mcp-Session-Id"][:32]]
        assert (run["kind"], run["status"]) == ("mcp_session", "completed")
        calls = (await http.get("/api/v1/tool-calls", params={"run_id": run["id"]})).json()
        assert calls["total"] == 3  # audited, the refused calls not


async def test_with_tracing_off_the_endpoint_leaves_out_the_sdks_span(
    committing_settings: Settings,
) -> None:
    """The SDK wraps every request in an OpenTelemetry span; without a tracer provider it
    records nothing, so the endpoint leaves it out (tests/ops/test_tracing.py: kept when
    tracing is on). Calls are answered all the same."""
    assert not committing_settings.tracing_enabled
    app = create_app(committing_settings)
    async with serve_app(app) as url:
        (endpoint,) = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/mcp"]
        assert isinstance(endpoint, McpEndpoint)
        assert not [m for m in endpoint.server.middleware if isinstance(m, SdkSpan)]
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as admin:
            name = (await post(admin, "agents", {"name": unique("untraced")}))["name"]
            headers = await opened(admin, f"/mcp/agents/{name}")
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            listed = await admin.post(f"/mcp/agents/{name}", json=listing, headers=headers)
            assert listed.status_code == 200, listed.text
            assert "tools" in listed.json()["result"]
