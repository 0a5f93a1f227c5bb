from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.db.base import utcnow
from app.mcp.models import McpServer
from tests.fixtures.crud import (
    check_delete,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    create,
)

PATH = "/api/v1/mcp-servers"
TOOLS = [{"name": "get_time", "description": "Current time", "input_schema": {"type": "object"}}]


def stdio(name: str = "clock", **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "stdio", "command": "mcp-server-time", **extra}


def remote(name: str = "search", **extra: Any) -> dict[str, Any]:
    return {"name": name, "transport": "streamable_http", "url": "https://mcp.test/mcp", **extra}


async def seed_tools(sessionmaker: async_sessionmaker[AsyncSession], server_id: str) -> None:
    async with sessionmaker() as session:
        row = await session.get(McpServer, uuid.UUID(server_id))
        assert row is not None
        row.tools_cache = TOOLS
        row.tools_refreshed_at = utcnow()
        await session.commit()


async def test_create_stdio_returns_201(client: httpx.AsyncClient) -> None:
    created = await create(
        client,
        PATH,
        stdio(args=["--local-timezone", "UTC"], env={"TZ_TOKEN": "tz-secret"}, call_timeout_s=5),
    )
    assert (created["transport"], created["command"]) == ("stdio", "mcp-server-time")
    assert created["args"] == ["--local-timezone", "UTC"]
    assert created["env"] == {"TZ_TOKEN": "***"}
    assert created["headers"] == {}
    assert created["url"] is None
    assert (created["connect_timeout_s"], created["call_timeout_s"]) == (20, 5)
    # the real mcp-server-time was started and its tools listed at create
    assert "get_current_time" in {t["name"] for t in created["tools"]}
    assert created["tools_refreshed_at"] is not None
    assert created.pop("tools_error") is None
    assert (await client.get(f"{PATH}/{created['id']}")).json() == created


async def test_create_remote_masks_headers(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, remote(headers={"Authorization": "Bearer abcdefgh123"}))
    assert created["headers"] == {"Authorization": "***"}
    assert created["transport"] == "streamable_http"
    # created all the same when its tools cannot be listed yet (here: no such host)
    assert (created["tools"], created["tools_refreshed_at"]) == ([], None)
    assert "mcp.test" in created["tools_error"]
    assert "abcdefgh123" not in created["tools_error"]
    sse = await create(client, PATH, remote("events", transport="sse"))
    assert sse["transport"] == "sse"


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [stdio("m1"), remote("m2"), stdio("m3")])


async def test_patch_changes_only_sent_fields(
    client: httpx.AsyncClient, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    created = await create(client, PATH, stdio(env={"K": "value-1"}))
    await seed_tools(sessionmaker, created["id"])
    item = f"{PATH}/{created['id']}"
    resp = await client.patch(item, json={"description": "Clock", "call_timeout_s": 9})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert (patched["description"], patched["call_timeout_s"]) == ("Clock", 9)
    assert patched["tools"] == TOOLS, "a description change keeps the cached tools"
    same = {k for k in created if k not in ("description", "call_timeout_s", "updated_at")}
    same -= {"tools_error"}
    same -= {"tools", "tools_refreshed_at"}
    assert {k: patched[k] for k in same} == {k: created[k] for k in same}


async def test_changing_the_connection_clears_cached_tools(
    client: httpx.AsyncClient, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    created = await create(client, PATH, stdio())
    await seed_tools(sessionmaker, created["id"])
    resp = await client.patch(f"{PATH}/{created['id']}", json={"env": {"NEW": "value-2"}})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["tools"], resp.json()["tools_refreshed_at"]) == ([], None)
    assert resp.json()["env"] == {"NEW": "***"}


async def test_switching_transport(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, stdio())
    item = f"{PATH}/{created['id']}"
    await check_patch_rejected(client, item, {"transport": "sse"}, mentions=["url"])
    resp = await client.patch(item, json={"transport": "sse", "url": "https://mcp.test/sse"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["transport"] == "sse"


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, stdio())
    item = f"{PATH}/{created['id']}"
    for field in ("name", "transport", "args", "connect_timeout_s", "call_timeout_s"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])
    await check_patch_rejected(client, item, {"command": None}, mentions=["command"])
    cleared = await client.patch(item, json={"env": None})
    assert cleared.status_code == 200, "env is optional"
    assert cleared.json()["env"] == {}


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, remote())
    await check_delete(client, PATH, created["id"])


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"name": "x", "command": "c"}, "transport"),
    (stdio(transport="websocket"), "transport"),
    (stdio(command=None), "command"),
    (stdio(command=""), "command"),
    (remote(url=None), "url"),
    (remote(url="ftp://mcp.test"), "url"),
    (remote(url="https://" + "a" * 2048), "url"),
    (stdio(args="--flag"), "args"),
    (stdio(env={"K": 1}), "env"),
    (remote(headers=["Authorization"]), "headers"),
    (stdio(connect_timeout_s=0), "connect_timeout_s"),
    (stdio(call_timeout_s=601), "call_timeout_s"),
    (stdio(tools=[]), "tools"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])
