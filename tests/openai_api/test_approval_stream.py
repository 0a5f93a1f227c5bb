"""An approval wait on the OpenAI-compatible stream: SSE comments keep it open until a person
decides; a client that goes away stops the run (as closing an OpenAI stream does)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.chat.conftest import CreateAgent
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.openai_api.helpers import chunks_of

LIVE_SETTINGS = {"egress_allow_cidrs": ["127.0.0.0/8"], "sse_ping_s": 0.3}
HITS: list[str] = []
GATED = {"approval": {"tools": ["http_fetch"], "timeout_s": 60}}


async def _page(request: Request) -> PlainTextResponse:
    HITS.append(request.url.path)
    return PlainTextResponse("the page")


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    async with serve_app(Starlette(routes=[Route("/page", _page)])) as base_url:  # type: ignore[arg-type]
        yield base_url


def fetch_then_answer(upstream: str) -> tuple[Turn, Turn]:
    return (
        Turn(tool_calls=[("f1", "http_fetch", {"url": f"{upstream}/page"})]),
        Turn(text="Fetched after approval."),
    )


async def pending_of(live: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    page = (await live.get("/api/v1/approvals", params={"status": "pending"})).json()
    return [a for a in page["items"] if a["run_id"] == run_id]


async def test_an_approval_wait_keeps_the_stream_open_with_comments(
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(model_config_json=GATED)
    scripted_llm.script(*fetch_then_answer(upstream))
    HITS.clear()
    body = {
        "model": agent["name"],
        "messages": [{"role": "user", "content": "fetch the page"}],
        "stream": True,
    }
    lines: list[str] = []
    async with (
        httpx.AsyncClient(base_url=live_url, timeout=30) as http,
        http.stream(
            "POST",
            "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as response,
    ):
        run_id = response.headers["x-run-id"]
        reading = response.aiter_lines()

        async def until_waiting(times: int) -> None:
            seen = 0
            while seen < times:
                line = await asyncio.wait_for(anext(reading), 10)
                lines.append(line)
                seen += line == ": waiting for approval"

        await until_waiting(3)  # announced, then repeated while idle (every sse_ping_s)
        assert HITS == []
        (approval,) = await pending_of(live, run_id)
        decided = await live.post(
            f"/api/v1/runs/{run_id}/approvals/{approval['id']}", json={"decision": "approve"}
        )
        assert decided.status_code == 200
        lines.extend([line async for line in reading])
    text = "\n".join(lines)
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks_of(text))
    assert content == "Fetched after approval."
    assert lines[-2:] == ["data: [DONE]", ""]
    assert ": ping" not in lines[: lines.index(": waiting for approval")]
    assert HITS == ["/page"]


async def test_a_client_that_goes_away_stops_the_run(
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(model_config_json=GATED)
    scripted_llm.script(*fetch_then_answer(upstream))
    body = {"model": agent["name"], "messages": [{"role": "user", "content": "go"}], "stream": True}
    async with (
        httpx.AsyncClient(base_url=live_url, timeout=30) as http,
        http.stream(
            "POST",
            "/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as response,
    ):
        run_id = response.headers["x-run-id"]
        async for line in response.aiter_lines():
            if line == ": waiting for approval":
                break
    # The stream closed before the end: the run is cancelled, its approval closed.
    for _ in range(100):
        run = (await live.get(f"/api/v1/runs/{run_id}")).json()
        if run["status"] != "running":
            break
        await asyncio.sleep(0.1)
    assert run["status"] == "cancelled"
    assert await pending_of(live, run_id) == []


async def test_a_non_streamed_request_waits_for_the_decision(
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(model_config_json=GATED)
    scripted_llm.script(*fetch_then_answer(upstream))
    body = {"model": agent["name"], "messages": [{"role": "user", "content": "go"}]}
    async with httpx.AsyncClient(base_url=live_url, timeout=30) as http:
        request = asyncio.create_task(
            http.post(
                "/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
        )
        for _ in range(100):
            pending = [
                a
                for a in (await live.get("/api/v1/approvals", params={"status": "pending"})).json()[
                    "items"
                ]
                if a["name"] == "http_fetch" and a["arguments"]["url"].startswith(upstream)
            ]
            if pending:
                break
            await asyncio.sleep(0.1)
        assert not request.done()
        (approval,) = pending
        decided = await live.post(
            f"/api/v1/runs/{approval['run_id']}/approvals/{approval['id']}",
            json={"decision": "deny", "reason": "not today"},
        )
        assert decided.status_code == 200
        response = await asyncio.wait_for(request, 20)
    assert response.status_code == 200
    assert response.headers["x-run-id"] == approval["run_id"]
    assert response.json()["choices"][0]["message"]["content"] == "Fetched after approval."
