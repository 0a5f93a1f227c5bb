"""`POST /api/v1/chat` is answered by `ChatFastPath` (app/chat/fast_route.py) when the key cache
answers its key, by the route otherwise: which requests it takes; the same answers either way."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession

from app.apikeys.schemas import ApiKeyCreate
from app.apikeys.service import api_key_service
from app.chat.fast_route import ChatFastPath
from tests.chat.conftest import CreateAgent, unique
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


def scope(token: str | None, *, content_type: bytes = b"application/json") -> dict[str, Any]:
    headers = [(b"content-type", content_type)]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    return {"type": "http", "method": "POST", "path": "/api/v1/chat", "headers": headers}


async def test_only_a_key_the_cache_answers_and_a_valid_json_body_take_the_fast_path(
    app: FastAPI, session: AsyncSession
) -> None:
    runtime = app.state.runtime
    _, token = await api_key_service.create(session, ApiKeyCreate(name=unique("k")))
    body = json.dumps({"agent_id": str(uuid.uuid4()), "message": "hi"}).encode()
    assert ChatFastPath._request(scope(token), body, runtime) is None  # not cached yet
    assert await runtime.keys.authenticate(session, token) is not None  # the route's lookup
    taken = ChatFastPath._request(scope(token), body, runtime)
    assert taken is not None
    req, principal, runs = taken
    assert (req.message, principal.user, runs) == ("hi", None, runtime.runs)
    for other in (
        ChatFastPath._request(scope(None), body, runtime),  # no key: the pre-check's 401
        ChatFastPath._request(scope(token + "x"), body, runtime),  # unknown key
        ChatFastPath._request(scope(token, content_type=b"text/plain"), body, runtime),
        ChatFastPath._request(scope(token), b'{"message": "hi"}', runtime),  # no agent_id
        ChatFastPath._request(scope(token), b"{", runtime),  # not JSON
    ):
        assert other is None
    runtime.keys.clear()
    assert ChatFastPath._request(scope(token), body, runtime) is None


async def answer(client: httpx.AsyncClient, case: dict[str, Any]) -> tuple[int, Any]:
    response = await client.post("/api/v1/chat", **case)
    return response.status_code, response.json()


async def test_the_route_and_the_fast_path_answer_alike(
    live: httpx.AsyncClient, create_agent: CreateAgent, scripted_llm: ScriptedLLM
) -> None:
    agent = (await create_agent())["id"]
    cases: list[dict[str, Any]] = [
        {"json": {"agent_id": str(uuid.uuid4()), "message": "hi"}},  # 404
        {
            "json": {"agent_id": agent, "message": "hi", "user": "a"},
            "headers": {"X-Quiver-User": "b"},
        },
        {"json": {"agent_id": agent}},  # 422: no message
        {
            "content": json.dumps({"agent_id": agent, "message": "hi"}),
            "headers": {"Content-Type": "text/plain"},
        },
        {"json": {"agent_id": agent, "message": "hi"}, "headers": {"X-Quiver-User": "u" * 300}},
    ]
    for case in cases:
        created = await live.post(
            "/api/v1/api-keys", json={"name": unique("k"), "scopes": ["chat"]}
        )
        key = created.json()["key"]
        async with httpx.AsyncClient(
            base_url=str(live.base_url), headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as client:
            first = await answer(client, case)  # a new key: the route (and the key is cached)
            again = await answer(client, case)  # the fast path when it takes the request
        assert first[0] in (404, 422), first
        assert again == first
    counted = 'quiver_http_requests_total{method="POST",route="/api/v1/chat",status="200"}'

    async def chats_counted() -> float:
        for line in (await live.get("/metrics")).text.splitlines():
            if line.startswith(counted):
                return float(line.split()[-1])
        return 0.0

    before = await chats_counted()
    scripted_llm.script(Turn(text="hello"), Turn(text="hello"))
    for _ in range(2):  # the route, then the fast path
        async with live.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent, "message": "hi"}
        ) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            events = await read_sse(r)
        assert [e.event for e in events][:: len(events) - 1] == ["run_started", "run_finished"]
        assert r.headers["x-run-id"] == events[0].data["run_id"]
    assert await chats_counted() == before + 2  # the fast path's under the route's label too
