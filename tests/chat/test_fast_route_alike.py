"""`POST /api/v1/chat` answers alike whether `ChatFastPath` (app/chat/fast_route.py) takes the
request or the route does: each request below is sent twice to one live Quiver, once as it
comes (the fast path takes what it can) and once with the fast path stepped aside, and the two
answers are compared — status, body, the headers a client reads, the events of a stream and
what was stored. Each case also says which path answered it, so a case that stops reaching the
fast path shows up here instead of silently comparing the route with itself."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from app.chat.fast_route import ChatFastPath
from app.config import Settings
from app.main import create_app
from tests.chat.conftest import live_settings, unique
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

CHAT = "/api/v1/chat"
MAX_BODY = 64 * 1024


class _Count:
    """Counts the chat requests that reach the app behind it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.count = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == CHAT:
            self.count += 1
        await self.app(scope, receive, send)


@dataclass
class Served:
    app: FastAPI
    url: str
    fast: ChatFastPath
    entered: _Count
    """Requests that reached the fast path (the outer layers let them through)."""
    routed: _Count
    """Requests the fast path passed on to the route."""

    def layer(self, entered: int, routed: int) -> str:
        """Which layer answered the request sent since the counts were `entered`, `routed`:
        the "fast" path, the "route", or a "guard" in front of both."""
        if self.entered.count == entered:
            return "guard"
        return "route" if self.routed.count > routed else "fast"

    @contextlib.contextmanager
    def route_only(self) -> Iterator[None]:
        """The fast path steps aside: every chat request goes to the route."""
        path, self.fast.path = self.fast.path, "/not-the-chat-path"
        try:
            yield
        finally:
            self.fast.path = path


def _before_fast_path(app: FastAPI) -> Any:
    """The layer whose `.app` is the `ChatFastPath`."""
    node: Any = app.middleware_stack
    while node is not None and not isinstance(getattr(node, "app", None), ChatFastPath):
        node = getattr(node, "app", None)
    assert node is not None, "the app has no ChatFastPath"
    return node


LIVE_SETTINGS = {"max_body_bytes": MAX_BODY}


@pytest.fixture(scope="module")
async def served(
    request: pytest.FixtureRequest, committing_settings: Settings
) -> AsyncIterator[Served]:
    app = create_app(live_settings(request, committing_settings))
    async with serve_app(app) as url:
        before = _before_fast_path(app)
        fast: ChatFastPath = before.app
        before.app = entered = _Count(fast)
        fast.app = routed = _Count(fast.app)
        yield Served(app, url, fast, entered, routed)


@dataclass
class World:
    """What a case builds its request from: an admin client, an agent, keys."""

    served: Served
    admin: httpx.AsyncClient
    agent: str
    llm: ScriptedLLM

    async def key(self, **fields: Any) -> str:
        """A new API key (scope chat unless told), cached by a first request."""
        body = {"name": unique("k"), "scopes": ["chat"], **fields}
        created = await self.admin.post("/api/v1/api-keys", json=body)
        assert created.status_code == 201, created.text
        key: str = created.json()["key"]
        await self.use(key)
        return key

    async def use(self, key: str) -> None:
        """A request that caches the key and records its use (what the fast path needs)."""
        async with httpx.AsyncClient(base_url=self.served.url, timeout=30) as client:
            r = await client.get("/api/v1/runs?limit=1", headers=bearer(key))
            assert r.status_code == 200, r.text

    async def conversation(self, key: str, agent: str | None = None) -> str:
        """A conversation of `key` with one finished run."""
        body = {"agent_id": agent or self.agent, "message": "first"}
        async with httpx.AsyncClient(base_url=self.served.url, timeout=30) as client:
            r = await client.post(CHAT, json=body, headers=bearer(key))
            assert r.status_code == 200, r.text
            return r.headers["x-conversation-id"]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


Request = dict[str, Any]
Build = Callable[[World], Awaitable[Request]]


def body(agent: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"agent_id": agent, "message": "hello", **fields}


def _json(w: World, **fields: Any) -> Request:
    return {"json": body(w.agent, **fields), "headers": bearer(ADMIN_TOKEN)}


async def valid(w: World) -> Request:
    return _json(w)


async def valid_chat_key(w: World) -> Request:
    return {"json": body(w.agent), "headers": bearer(await w.key())}


async def lowercase_scheme(w: World) -> Request:
    return {"json": body(w.agent), "headers": {"Authorization": f"bearer {await w.key()}"}}


async def charset_json(w: World) -> Request:
    return {
        "content": json.dumps(body(w.agent)),
        "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "application/json; charset=utf-8"},
    }


async def user_in_body(w: World) -> Request:
    return _json(w, user="alice")


async def user_header(w: World) -> Request:
    return {"json": body(w.agent), "headers": {**bearer(ADMIN_TOKEN), "X-Quiver-User": "bob"}}


async def same_user_twice(w: World) -> Request:
    return {
        "json": body(w.agent, user="carol"),
        "headers": {**bearer(ADMIN_TOKEN), "X-Quiver-User": "carol"},
    }


async def blank_user_header(w: World) -> Request:
    return {"json": body(w.agent), "headers": {**bearer(ADMIN_TOKEN), "X-Quiver-User": ""}}


async def null_conversation(w: World) -> Request:
    return _json(w, conversation_id=None)


async def continued(w: World) -> Request:
    key = await w.key()
    return {
        "json": body(w.agent, conversation_id=await w.conversation(key)),
        "headers": bearer(key),
    }


async def unknown_agent(w: World) -> Request:
    return {"json": body(str(uuid.uuid4())), "headers": bearer(ADMIN_TOKEN)}


async def agent_not_the_keys(w: World) -> Request:
    other = (await w.admin.post("/api/v1/agents", json={"name": unique("other")})).json()
    key = await w.key(agent_ids=[other["id"]])
    return {"json": body(w.agent), "headers": bearer(key)}


async def unknown_conversation(w: World) -> Request:
    return _json(w, conversation_id=str(uuid.uuid4()))


async def someone_elses_conversation(w: World) -> Request:
    conversation = await w.conversation(await w.key())
    return {"json": body(w.agent, conversation_id=conversation), "headers": bearer(await w.key())}


async def another_agents_conversation(w: World) -> Request:
    other = (await w.admin.post("/api/v1/agents", json={"name": unique("other")})).json()
    key = await w.key()
    conversation = await w.conversation(key, other["id"])
    return {"json": body(w.agent, conversation_id=conversation), "headers": bearer(key)}


async def over_the_rate_limit(w: World) -> Request:
    key = await w.key(rate_limit_per_minute=1)
    await w.conversation(key)  # its one run this minute
    return {"json": body(w.agent), "headers": bearer(key)}


async def differing_users(w: World) -> Request:
    return {
        "json": body(w.agent, user="a"),
        "headers": {**bearer(ADMIN_TOKEN), "X-Quiver-User": "b"},
    }


async def long_user_header(w: World) -> Request:
    headers = {**bearer(ADMIN_TOKEN), "X-Quiver-User": "u" * 300}
    return {"json": body(w.agent), "headers": headers}


async def long_user_in_body(w: World) -> Request:
    return _json(w, user="u" * 300)


async def empty_message(w: World) -> Request:
    return {"json": {"agent_id": w.agent, "message": ""}, "headers": bearer(ADMIN_TOKEN)}


async def no_message(w: World) -> Request:
    return {"json": {"agent_id": w.agent}, "headers": bearer(ADMIN_TOKEN)}


async def agent_not_a_uuid(w: World) -> Request:
    return {"json": body("not-a-uuid"), "headers": bearer(ADMIN_TOKEN)}


async def unknown_field(w: World) -> Request:
    return _json(w, temperature=0.2)


async def message_not_a_string(w: World) -> Request:
    return {"json": {"agent_id": w.agent, "message": 42}, "headers": bearer(ADMIN_TOKEN)}


async def bad_json(w: World) -> Request:
    return {
        "content": b'{"agent_id": ',
        "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "application/json"},
    }


async def json_array(w: World) -> Request:
    return {"json": [body(w.agent)], "headers": bearer(ADMIN_TOKEN)}


async def empty_body(w: World) -> Request:
    return {"content": b"", "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "application/json"}}


async def not_utf8(w: World) -> Request:
    raw = json.dumps(body(w.agent)).encode().replace(b"hello", b"h\xffllo")
    return {"content": raw, "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "application/json"}}


async def deep_json(w: World) -> Request:
    raw = json.dumps({"agent_id": w.agent, "message": "x", "user": None})[:-1]
    raw += ', "x": ' + "[" * 5000 + "]" * 5000 + "}"
    return {"content": raw, "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "application/json"}}


async def nul_in_message(w: World) -> Request:
    return _json(w, message="a\u0000b")


async def oversize_body(w: World) -> Request:
    return _json(w, message="x" * MAX_BODY)


async def text_plain(w: World) -> Request:
    return {
        "content": json.dumps(body(w.agent)),
        "headers": {**bearer(ADMIN_TOKEN), "Content-Type": "text/plain"},
    }


async def no_key(w: World) -> Request:
    return {"json": body(w.agent)}


async def unknown_key(w: World) -> Request:
    return {"json": body(w.agent), "headers": bearer("qv_" + "0" * 40)}


async def revoked_key(w: World) -> Request:
    created = await w.admin.post("/api/v1/api-keys", json={"name": unique("k"), "scopes": ["chat"]})
    key, key_id = created.json()["key"], created.json()["id"]
    await w.use(key)
    assert (await w.admin.delete(f"/api/v1/api-keys/{key_id}")).status_code == 204
    return {"json": body(w.agent), "headers": bearer(key)}


async def agent_dropped_from_the_key(w: World) -> Request:
    """The key was cached, then its agents were changed: the change reaches the cache."""
    created = await w.admin.post("/api/v1/api-keys", json={"name": unique("k"), "scopes": ["chat"]})
    key, key_id = created.json()["key"], created.json()["id"]
    await w.use(key)
    other = (await w.admin.post("/api/v1/agents", json={"name": unique("other")})).json()
    patched = await w.admin.patch(f"/api/v1/api-keys/{key_id}", json={"agent_ids": [other["id"]]})
    assert patched.status_code == 200, patched.text
    return {"json": body(w.agent), "headers": bearer(key)}


# (case, its status, which layer answers it: "fast" path, "route", or a "guard" in front)
CASES: list[tuple[Build, int, str]] = [
    (valid, 200, "fast"),
    (valid_chat_key, 200, "fast"),
    (lowercase_scheme, 200, "fast"),
    (charset_json, 200, "fast"),
    (user_in_body, 200, "fast"),
    (user_header, 200, "fast"),
    (same_user_twice, 200, "fast"),
    (blank_user_header, 200, "fast"),
    (null_conversation, 200, "fast"),
    (continued, 200, "fast"),
    (unknown_agent, 404, "fast"),
    (agent_not_the_keys, 404, "fast"),
    (unknown_conversation, 404, "fast"),
    (someone_elses_conversation, 404, "fast"),
    (another_agents_conversation, 422, "fast"),
    (over_the_rate_limit, 429, "fast"),
    (differing_users, 422, "route"),
    (long_user_header, 422, "route"),
    (long_user_in_body, 422, "route"),
    (empty_message, 422, "route"),
    (no_message, 422, "route"),
    (agent_not_a_uuid, 422, "route"),
    (unknown_field, 422, "route"),
    (message_not_a_string, 422, "route"),
    (bad_json, 422, "route"),
    (json_array, 422, "route"),
    (empty_body, 422, "route"),
    (not_utf8, 422, "route"),
    (deep_json, 422, "route"),
    (nul_in_message, 422, "guard"),
    (oversize_body, 413, "guard"),
    (text_plain, 422, "route"),
    (no_key, 401, "guard"),
    (unknown_key, 401, "route"),
    (revoked_key, 401, "route"),
    (agent_dropped_from_the_key, 404, "route"),
]


async def answer(w: World, request: Request) -> dict[str, Any]:
    """What a client sees, without what differs by nature (ids, timings)."""
    async with (
        httpx.AsyncClient(base_url=w.served.url, timeout=30) as client,
        client.stream("POST", CHAT, **request) as response,
    ):
        raw = await response.aread()
    seen: dict[str, Any] = {
        "status": response.status_code,
        "content-type": response.headers.get("content-type"),
        "retry-after": response.headers.get("retry-after") is not None,
    }
    if response.status_code != 200:
        seen["body"] = json.loads(raw)
        return seen
    events = [
        (block.split("\n")[1].removeprefix("event: "), json.loads(block.split("\n")[2][6:]))
        for block in raw.decode().strip().split("\n\n")
        if block.startswith("id:")
    ]
    conversation = response.headers["x-conversation-id"]
    stored = (await w.admin.get(f"/api/v1/conversations/{conversation}")).json()
    run = next(r for r in stored["runs"] if r["id"] == response.headers["x-run-id"])
    seen |= {
        "cache-control": response.headers.get("cache-control"),
        "events": [kind for kind, _ in events],
        "ids": (events[0][1]["run_id"], events[0][1]["conversation_id"])
        == (run["id"], conversation),
        "finished": events[-1][1]["status"],
        "stored": [(m["role"], m["content"]) for m in stored["messages"]][-2:],
        "run": (run["status"], stored.get("user")),
    }
    return seen


@pytest.fixture
async def world(served: Served, scripted_llm: ScriptedLLM) -> AsyncIterator[World]:
    async with httpx.AsyncClient(
        base_url=served.url, headers=bearer(ADMIN_TOKEN), timeout=30
    ) as admin:
        agent = (await admin.post("/api/v1/agents", json={"name": unique("alike")})).json()
        yield World(served, admin, agent["id"], scripted_llm)


@pytest.mark.parametrize(("build", "status", "layer"), CASES, ids=[c[0].__name__ for c in CASES])
async def test_the_fast_path_and_the_route_answer_alike(
    world: World, build: Build, status: int, layer: str
) -> None:
    request = await build(world)
    if layer == "fast":  # any stored change (a new agent, key...) drops the cached keys
        await world.use(request["headers"]["Authorization"].split()[1])
    counts = world.served.entered.count, world.served.routed.count
    through_fast = await answer(world, request)
    assert world.served.layer(*counts) == layer
    with world.served.route_only():
        through_route = await answer(world, request)
    assert through_fast["status"] == status, through_fast
    assert through_fast == through_route


async def test_a_draining_process_answers_alike(world: World) -> None:
    runs = world.served.app.state.runtime.runs
    request = await valid(world)
    await world.use(ADMIN_TOKEN)
    runs.drain()
    try:
        counts = world.served.entered.count, world.served.routed.count
        through_fast = await answer(world, request)
        assert world.served.layer(*counts) == "fast"
        with world.served.route_only():
            through_route = await answer(world, request)
    finally:
        runs.draining_since = None
    assert through_fast["status"] == 503
    assert through_fast == through_route


async def test_a_conversation_with_a_run_in_progress_answers_alike(world: World) -> None:
    key = await world.key()
    world.llm.script(Turn(text="slow " * 200, token_delay_s=0.05))
    async with (
        httpx.AsyncClient(base_url=world.served.url, timeout=30) as client,
        client.stream("POST", CHAT, json=body(world.agent), headers=bearer(key)) as running,
    ):
        assert running.status_code == 200
        request = {
            "json": body(world.agent, conversation_id=running.headers["x-conversation-id"]),
            "headers": bearer(key),
        }
        counts = world.served.entered.count, world.served.routed.count
        through_fast = await answer(world, request)
        assert world.served.layer(*counts) == "fast"
        with world.served.route_only():
            through_route = await answer(world, request)
        cancel = f"/api/v1/runs/{running.headers['x-run-id']}/cancel"
        assert (await world.admin.post(cancel)).status_code == 200
        await running.aread()
    assert through_fast["status"] == 409
    assert through_fast == through_route


async def test_both_count_under_the_routes_metrics_label(world: World) -> None:
    counted = 'quiver_http_requests_total{method="POST",route="/api/v1/chat",status="200"}'

    async def chats() -> float:
        for line in (await world.admin.get("/metrics")).text.splitlines():
            if line.startswith(counted):
                return float(line.split()[-1])
        return 0.0

    before = await chats()
    request = await valid(world)
    await world.use(ADMIN_TOKEN)
    counts = world.served.entered.count, world.served.routed.count
    assert (await answer(world, request))["status"] == 200
    assert world.served.layer(*counts) == "fast"
    with world.served.route_only():
        assert (await answer(world, request))["status"] == 200
    assert await chats() == before + 2
