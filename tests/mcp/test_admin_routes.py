"""MCP refresh and the admin call route through HTTP, with the real `mcp-server-time` over stdio."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.mcp.servers import TIME_SERVER


@contextlib.asynccontextmanager
async def admin_client(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process app allowed to start `mcp-server-time`, and an admin client of it."""
    allowed = settings.model_copy(update={"mcp_stdio_commands": [TIME_SERVER]})
    app = create_app(allowed, sessionmaker=sessionmaker)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=60,
        ) as client,
    ):
        yield client


@pytest.fixture
async def stdio_client(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[httpx.AsyncClient]:
    async with admin_client(settings, sessionmaker) as client:
        yield client


async def test_create_lists_tools_then_call_answers(stdio_client: httpx.AsyncClient) -> None:
    created = await stdio_client.post(
        "/api/v1/mcp-servers",
        json={
            "name": "time",
            "transport": "stdio",
            "command": TIME_SERVER,
            "env": {"SOME_TOKEN": "env-secret-98765"},
        },
    )
    assert created.status_code == 201, created.text
    server = created.json()
    # listed at create: a chat sees the tools without a refresh
    assert "get_current_time" in {t["name"] for t in server["tools"]}
    assert server["tools_refreshed_at"] is not None
    assert server["tools_error"] is None
    assert server["env"] == {"SOME_TOKEN": "***"}
    stored = (await stdio_client.get(f"/api/v1/mcp-servers/{server['id']}")).json()
    assert stored["tools"] == server["tools"]

    refreshed = await stdio_client.post(f"/api/v1/mcp-servers/{server['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    tools = {t["name"]: t for t in refreshed.json()["tools"]}
    assert "get_current_time" in tools
    assert tools["get_current_time"]["input_schema"]["type"] == "object"
    assert refreshed.json()["tools_refreshed_at"] is not None

    call = await stdio_client.post(
        f"/api/v1/mcp-servers/{server['id']}/call",
        json={"tool": "get_current_time", "arguments": {"timezone": "UTC"}},
    )
    assert call.status_code == 200
    assert call.json()["ok"] is True, call.json()
    assert "UTC" in call.json()["output"]

    near_miss = await stdio_client.post(
        f"/api/v1/mcp-servers/{server['id']}/call",
        json={"tool": "get_current_tim", "arguments": {}},
    )
    assert near_miss.json()["ok"] is False
    assert "get_current_time" in near_miss.json()["error"]

    bad_args = await stdio_client.post(
        f"/api/v1/mcp-servers/{server['id']}/call",
        json={"tool": "get_current_time", "arguments": {"timezone": 5}},
    )
    assert bad_args.json()["ok"] is False
    assert "timezone" in bad_args.json()["error"]
    assert "env-secret-98765" not in call.text + refreshed.text + created.text


async def test_command_off_the_allow_list_is_refused_at_create(
    stdio_client: httpx.AsyncClient,
) -> None:
    created = await stdio_client.post(
        "/api/v1/mcp-servers",
        json={"name": "sneaky", "transport": "stdio", "command": "/bin/sh", "args": ["-c", "id"]},
    )
    assert created.status_code == 422, created.text
    assert created.json()["error"] == "Invalid"
    detail = created.json()["detail"]
    assert detail.startswith("command: stdio command '/bin/sh' is not on the allow-list")
    assert "add it to QUIVER_MCP_STDIO_COMMANDS" in detail
    listed = (await stdio_client.get("/api/v1/mcp-servers")).json()
    assert listed["total"] == 0
    good = await stdio_client.post(
        "/api/v1/mcp-servers", json={"name": "time", "transport": "stdio", "command": TIME_SERVER}
    )
    assert good.status_code == 201, good.text
    patched = await stdio_client.patch(
        f"/api/v1/mcp-servers/{good.json()['id']}", json={"command": "/bin/sh"}
    )
    assert patched.status_code == 422
    assert "QUIVER_MCP_STDIO_COMMANDS" in patched.json()["detail"]
    kept = (await stdio_client.get(f"/api/v1/mcp-servers/{good.json()['id']}")).json()
    assert kept["command"] == TIME_SERVER


@pytest.fixture
async def bare_command_client(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[httpx.AsyncClient]:
    """The README's set-up: bare names on the allow-list, the venv's bin/ not on PATH."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    allowed = settings.model_copy(
        update={"mcp_stdio_commands": ["mcp-server-time", "no-such-mcp-server"]}
    )
    app = create_app(allowed, sessionmaker=sessionmaker)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=60,
        ) as client,
    ):
        yield client


async def test_a_bare_command_installed_next_to_quiver_runs_without_path(
    bare_command_client: httpx.AsyncClient,
) -> None:
    created = await bare_command_client.post(
        "/api/v1/mcp-servers",
        json={"name": "time", "transport": "stdio", "command": "mcp-server-time"},
    )
    assert created.status_code == 201, created.text
    refreshed = await bare_command_client.post(
        f"/api/v1/mcp-servers/{created.json()['id']}/refresh"
    )
    assert refreshed.status_code == 200, refreshed.text
    assert "get_current_time" in {t["name"] for t in refreshed.json()["tools"]}


async def test_a_missing_command_is_named_with_the_allow_list(
    bare_command_client: httpx.AsyncClient,
) -> None:
    created = await bare_command_client.post(
        "/api/v1/mcp-servers",
        json={"name": "ghost", "transport": "stdio", "command": "no-such-mcp-server"},
    )
    assert created.status_code == 201, created.text
    refreshed = await bare_command_client.post(
        f"/api/v1/mcp-servers/{created.json()['id']}/refresh"
    )
    assert 400 <= refreshed.status_code < 500, refreshed.text
    body = refreshed.json()
    assert set(body) == {"error", "detail"}
    assert "'no-such-mcp-server' was not found" in body["detail"]
    assert "QUIVER_MCP_STDIO_COMMANDS=mcp-server-time,no-such-mcp-server" in body["detail"]


async def test_the_call_route_never_serves_a_deleted_server(
    stdio_client: httpx.AsyncClient,
) -> None:
    """The route keeps server rows in process: a delete (or edit) must be seen at once."""
    created = await stdio_client.post(
        "/api/v1/mcp-servers", json={"name": "clock", "transport": "stdio", "command": TIME_SERVER}
    )
    server = created.json()
    call = f"/api/v1/mcp-servers/{server['id']}/call"
    body = {"tool": "get_current_time", "arguments": {"timezone": "UTC"}}
    (await stdio_client.post(f"/api/v1/mcp-servers/{server['id']}/refresh")).raise_for_status()
    for _ in range(2):  # the second answer comes from the row held in process
        assert (await stdio_client.post(call, json=body)).json()["ok"] is True

    moved = {"transport": "streamable_http", "url": "http://127.0.0.1:9/mcp"}
    renamed = await stdio_client.patch(f"/api/v1/mcp-servers/{server['id']}", json=moved)
    assert renamed.status_code == 200, renamed.text
    refused = (await stdio_client.post(call, json=body)).json()
    assert refused["ok"] is False
    assert "http://127.0.0.1:9/mcp" in refused["error"]

    assert (await stdio_client.delete(f"/api/v1/mcp-servers/{server['id']}")).status_code == 204
    gone = await stdio_client.post(call, json=body)
    assert gone.status_code == 404
    assert "not found" in gone.text


class _CountingSessionmaker(async_sessionmaker[AsyncSession]):
    """The tests' sessionmaker, counting the sessions it hands out."""

    opened = 0

    def __call__(self, **local_kw: Any) -> AsyncSession:
        self.opened += 1
        return super().__call__(**local_kw)


async def test_a_warm_call_opens_no_database_session(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """Key and server row from the in-process caches: no session per call (README "MCP call
    overhead"); an unknown id still reads the store and answers 404."""
    counting = _CountingSessionmaker(**sessionmaker.kw)
    async with admin_client(settings, counting) as client:
        created = await client.post(
            "/api/v1/mcp-servers",
            json={"name": "clock", "transport": "stdio", "command": TIME_SERVER},
        )
        server_id = created.json()["id"]
        (await client.post(f"/api/v1/mcp-servers/{server_id}/refresh")).raise_for_status()
        call = f"/api/v1/mcp-servers/{server_id}/call"
        body = {"tool": "get_current_time", "arguments": {"timezone": "UTC"}}
        assert (await client.post(call, json=body)).json()["ok"] is True  # loads the row
        before = counting.opened
        for _ in range(3):
            answer = await client.post(call, json=body)
            assert answer.status_code == 200, answer.text
            assert answer.json()["ok"] is True, answer.text
        bad = (await client.post(call, json={"tool": "get_current_time", "arguments": {}})).json()
        assert bad["ok"] is False
        assert "timezone" in bad["error"]
        assert counting.opened == before

        unknown = await client.post(f"/api/v1/mcp-servers/{uuid.uuid4()}/call", json=body)
        assert unknown.status_code == 404
        assert counting.opened == before + 1
