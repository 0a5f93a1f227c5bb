"""A NUL character (U+0000) from the model, a fetched page or an MCP server never ends a run.

PostgreSQL stores no NUL in text or JSON columns (SQLite would): what is stored — the journal,
the conversation's messages, the tool-call audit — has each NUL replaced by U+FFFD on both
stores, so live and replayed events agree and the run completes on either. Real runs: the
scripted LLM, a local HTTP page for `http_fetch`, our MCP test server over stdio.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.config import Settings
from tests.chat.conftest import unique
from tests.chat.test_faults import REPO, assert_complete, gateway, new_agent, replay
from tests.chat.test_faults import store as store  # the postgres / sqlite fixture
from tests.fixtures.live import SseEvent, read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

MARK = "\ufffd"


async def _nul_page(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("abc\x00def")


@pytest.fixture(scope="module")
async def page() -> AsyncIterator[str]:
    async with serve_app(Starlette(routes=[Route("/nul", _nul_page)])) as base_url:  # type: ignore[arg-type]
        yield base_url


async def _chat(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[str, list[SseEvent]]:
    async with client.stream("POST", "/api/v1/chat", json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        run_id = resp.headers["x-run-id"]
        events = await asyncio.wait_for(read_sse(resp), 60)
    return run_id, events


async def _audit(client: httpx.AsyncClient, run_id: str, calls: int) -> list[dict[str, Any]]:
    """The run's audit rows (written off the call path: wait for them)."""
    for _ in range(100):
        rows: list[dict[str, Any]] = (
            await client.get("/api/v1/tool-calls", params={"run_id": run_id})
        ).json()["items"]
        if len(rows) >= calls:
            return rows
        await asyncio.sleep(0.1)
    raise AssertionError(f"{calls} audit rows expected for run {run_id}, got {rows}")


async def test_nul_in_tool_arguments_a_fetched_page_and_model_text_is_stored(
    store: Settings, scripted_llm: ScriptedLLM, page: str
) -> None:
    async with gateway(store, egress_allow_cidrs=["127.0.0.0/8"]) as client:
        agent_id = await new_agent(client)
        scripted_llm.script(
            Turn(
                tool_calls=[
                    ("c1", "http_fetch", {"url": f"{page}/nul"}),
                    ("c2", "http_fetch", {"url": f"{page}/nul", "q": "a\x00b"}),
                ]
            ),
            Turn(text="page says abc\x00def"),
        )
        run_id, live = await _chat(client, {"agent_id": agent_id, "message": "fetch it"})
        assert_complete(live)
        assert live[-1].event == "run_finished", live[-1]
        assert live[-1].data["status"] == "completed"
        calls = {e.data["call_id"]: e.data for e in live if e.event == "tool_call"}
        assert calls["c2"]["arguments"]["q"] == f"a{MARK}b"
        results = {e.data["call_id"]: e.data for e in live if e.event == "tool_result"}
        assert results["c1"]["ok"] is True
        assert f"abc{MARK}def" in results["c1"]["output"]
        text = "".join(e.data["text"] for e in live if e.event == "model_delta")
        assert text == f"page says abc{MARK}def"
        assert not [e for e in live if "\x00" in str(e.data)]
        assert await replay(client, run_id) == live

        rows = await _audit(client, run_id, 2)
        by_args = {r["arguments"].get("q", ""): r for r in rows}
        assert set(by_args) == {"", f"a{MARK}b"}

        conversation_id = live[0].data["conversation_id"]
        stored = (await client.get(f"/api/v1/conversations/{conversation_id}")).json()
        contents = [m["content"] or "" for m in stored["messages"]]
        assert any(f"abc{MARK}def" in c for c in contents)
        # the history (with the marker) goes back to the model on the next turn
        scripted_llm.script(Turn(text="again"))
        body = {"agent_id": agent_id, "message": "more", "conversation_id": conversation_id}
        _, second = await _chat(client, body)
        assert second[-1].data["status"] == "completed"
        sent = scripted_llm.requests[-1]["messages"]
        assert any(MARK in str(m.get("content") or "") for m in sent)


async def test_nul_in_an_mcp_tool_result_is_stored(
    store: Settings, scripted_llm: ScriptedLLM
) -> None:
    async with gateway(store, mcp_stdio_commands=[sys.executable]) as client:
        created = await client.post(
            "/api/v1/mcp-servers",
            json={
                "name": unique("nul"),
                "transport": "stdio",
                "command": sys.executable,
                "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
                "env": {"PYTHONPATH": str(REPO)},
            },
        )
        assert created.status_code == 201, created.text
        server = created.json()
        refreshed = await client.post(f"/api/v1/mcp-servers/{server['id']}/refresh")
        assert refreshed.status_code == 200, refreshed.text
        agent_id = await new_agent(client, mcp_server_ids=[server["id"]])
        call = {
            "subcommand": "call",
            "server": server["name"],
            "tool": "nul_text",
            "parameters": {},
        }
        scripted_llm.script(Turn(tool_calls=[("c1", "mcp", call)]), Turn(text="read it"))
        run_id, live = await _chat(client, {"agent_id": agent_id, "message": "call it"})
        assert_complete(live)
        assert live[-1].data["status"] == "completed", live[-1]
        [result] = [e for e in live if e.event == "tool_result"]
        assert result.data["ok"] is True
        assert f"abc{MARK}def" in result.data["output"]
        assert await replay(client, run_id) == live
        [row] = await _audit(client, run_id, 1)
        assert row["ok"] is True
