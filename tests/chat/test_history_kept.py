"""Deleting an agent, connector, database or MCP server keeps the history that names it:
runs, their journals, conversations and tool calls stay readable (the resource shown as
deleted, its name kept) in the API and the console; only deleting the conversation removes
them. Real runs on PostgreSQL and SQLite: the scripted LLM, a local HTTP upstream for the
connector, a SQLite database, our MCP test server over stdio."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.config import Settings
from tests.chat.conftest import unique
from tests.chat.test_faults import REPO, assert_complete, gateway, new_agent, replay
from tests.chat.test_faults import store as store  # the postgres / sqlite fixture
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


async def _ping(_request: Request) -> JSONResponse:
    return JSONResponse({"pong": True})


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    async with serve_app(Starlette(routes=[Route("/ping", _ping)])) as base_url:  # type: ignore[arg-type]
        yield base_url


async def _created(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = await client.post(path, json=body)
    assert resp.status_code == 201, resp.text
    data: dict[str, Any] = resp.json()
    return data


async def _audit(client: httpx.AsyncClient, run_id: str, calls: int) -> list[dict[str, Any]]:
    for _ in range(100):
        rows: list[dict[str, Any]] = (
            await client.get("/api/v1/tool-calls", params={"run_id": run_id})
        ).json()["items"]
        if len(rows) >= calls:
            return rows
        await asyncio.sleep(0.1)
    raise AssertionError(f"{calls} audit rows expected, got {rows}")


async def _console(base_url: str) -> httpx.AsyncClient:
    browser = httpx.AsyncClient(base_url=base_url, timeout=30)
    form = await browser.get("/ui/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    assert token is not None
    signed = await browser.post(
        "/ui/login", data={"api_key": ADMIN_TOKEN, "csrf_token": token.group(1)}
    )
    assert signed.status_code == 303, signed.text
    return browser


async def test_deleting_resources_keeps_their_runs_readable(
    store: Settings, scripted_llm: ScriptedLLM, upstream: str, tmp_path: Path
) -> None:
    shop = tmp_path / "shop.db"
    with sqlite3.connect(shop) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO items (name) VALUES ('lamp')")
    settings = {"egress_allow_cidrs": ["127.0.0.0/8"], "mcp_stdio_commands": [sys.executable]}
    async with gateway(store, **settings) as client:
        connector = await _created(
            client,
            "/api/v1/connectors",
            {
                "name": unique("desk"),
                "base_url": upstream,
                "actions": [{"name": "ping", "method": "GET", "path": "/ping"}],
            },
        )
        database = await _created(
            client, "/api/v1/databases", {"name": unique("shop"), "url": f"sqlite:///{shop}"}
        )
        server = await _created(
            client,
            "/api/v1/mcp-servers",
            {
                "name": unique("tools"),
                "transport": "stdio",
                "command": sys.executable,
                "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
                "env": {"PYTHONPATH": str(REPO)},
            },
        )
        refreshed = await client.post(f"/api/v1/mcp-servers/{server['id']}/refresh")
        assert refreshed.status_code == 200, refreshed.text
        agent_name = unique("retired")
        agent_id = await new_agent(
            client,
            name=agent_name,
            connector_ids=[connector["id"]],
            database_ids=[database["id"]],
            mcp_server_ids=[server["id"]],
        )
        calls = [
            ("c1", "connector", {"subcommand": "execute", "connector": connector["name"],
                                 "action": "ping", "parameters": {}}),
            ("c2", "database", {"subcommand": "query", "database": database["name"],
                                "sql": "SELECT name FROM items"}),
            ("c3", "mcp", {"subcommand": "call", "server": server["name"], "tool": "echo",
                           "parameters": {"text": "hi"}}),
        ]  # fmt: skip
        scripted_llm.script(Turn(tool_calls=calls), Turn(text="all done"))
        async with client.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": "use everything"}
        ) as resp:
            assert resp.status_code == 200
            run_id = resp.headers["x-run-id"]
            conversation_id = resp.headers["x-conversation-id"]
            live = await asyncio.wait_for(read_sse(resp), 60)
        assert_complete(live)
        assert live[-1].data["status"] == "completed"
        results = {e.data["call_id"]: e.data["ok"] for e in live if e.event == "tool_result"}
        assert results == {"c1": True, "c2": True, "c3": True}, live
        before = await _audit(client, run_id, 3)
        assert not [row for row in before if row["target_deleted"]]

        for path in (
            f"/api/v1/agents/{agent_id}",
            f"/api/v1/connectors/{connector['id']}",
            f"/api/v1/databases/{database['id']}",
            f"/api/v1/mcp-servers/{server['id']}",
        ):
            assert (await client.delete(path)).status_code == 204, path
        assert (await client.get(f"/api/v1/agents/{agent_id}")).status_code == 404

        run = await client.get(f"/api/v1/runs/{run_id}")
        assert run.status_code == 200, run.text
        assert run.json()["agent"] == {"id": agent_id, "name": agent_name, "deleted": True}
        listed = (await client.get("/api/v1/runs", params={"agent_id": agent_id})).json()
        assert [r["id"] for r in listed["items"]] == [run_id]
        assert listed["items"][0]["agent"]["deleted"] is True
        assert await replay(client, run_id) == live
        conversation = await client.get(f"/api/v1/conversations/{conversation_id}")
        assert conversation.status_code == 200, conversation.text
        assert conversation.json()["agent"]["name"] == agent_name
        assert next(m["role"] for m in conversation.json()["messages"]) == "user"
        summaries = await client.get("/api/v1/conversations", params={"agent_id": agent_id})
        assert summaries.json()["items"][0]["agent"]["deleted"] is True
        after = await _audit(client, run_id, 3)
        assert {row["kind"]: row["target_deleted"] for row in after} == {
            "connector": True,
            "database": True,
            "mcp": True,
        }
        # a new resource under an old name does not undo "deleted" for the old calls
        await _created(client, "/api/v1/connectors", {"name": connector["name"],
                                                      "base_url": upstream})  # fmt: skip
        again = await _audit(client, run_id, 3)
        assert all(row["target_deleted"] for row in again)
        # the deleted agent takes no new runs
        gone = await client.post("/api/v1/chat", json={"agent_id": agent_id, "message": "hi"})
        assert gone.status_code == 404

        browser = await _console(str(client.base_url))
        try:
            runs_page = await browser.get("/ui/runs")
            assert runs_page.status_code == 200
            row = re.search(rf'data-run-id="{run_id}".*?</tr>', runs_page.text, re.S)
            assert row is not None
            assert agent_name in row.group(0)
            assert 'data-testid="agent-deleted"' in row.group(0)
            detail = await browser.get(f"/ui/runs/{run_id}")
            assert detail.status_code == 200
            assert agent_name in detail.text
            assert 'data-testid="agent-deleted"' in detail.text
            audit_page = await browser.get("/ui/tool-calls", params={"run_id": run_id})
            assert audit_page.text.count('data-testid="target-deleted"') == 3
        finally:
            await browser.aclose()

        # deleting the conversation is what removes the history
        assert (await client.delete(f"/api/v1/conversations/{conversation_id}")).status_code == 204
        assert (await client.get(f"/api/v1/runs/{run_id}")).status_code == 404
        assert (await client.get(f"/api/v1/conversations/{conversation_id}")).status_code == 404
