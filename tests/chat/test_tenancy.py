"""Tenancy: conversations and runs belong to the key (and optional user) that created them;
keys may be limited to some agents; the operator routes show each key only its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.chat.conftest import CreateAgent, unique
from tests.fixtures.live import SseReader, read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

KeyClient = Callable[..., Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def key_client(live: httpx.AsyncClient) -> AsyncIterator[KeyClient]:
    """Creates an API key through the admin API and returns a client using it."""
    clients: list[httpx.AsyncClient] = []

    async def make(**fields: Any) -> httpx.AsyncClient:
        body = {"name": unique("key"), "scopes": ["chat"], **fields}
        created = await live.post("/api/v1/api-keys", json=body)
        assert created.status_code == 201, created.text
        client = httpx.AsyncClient(
            base_url=str(live.base_url),
            headers={"Authorization": f"Bearer {created.json()['key']}"},
            timeout=30,
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def chat(
    client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[str, str]:
    """Run to the end; (conversation id, run id)."""
    async with client.stream("POST", "/api/v1/chat", json=body, headers=headers) as resp:
        assert resp.status_code == 200, await resp.aread()
        events = await read_sse(resp)
    assert events[-1].event == "run_finished", events[-1]
    return events[0].data["conversation_id"], events[0].data["run_id"]


def assert_not_found(resp: httpx.Response, label: str, id: str) -> None:
    """Exactly what an unknown id answers."""
    assert resp.status_code == 404, resp.text
    assert resp.json() == {"error": "NotFound", "detail": f"{label} {id!r} not found"}


async def test_a_chat_key_cannot_touch_another_keys_conversation_or_run(
    live: httpx.AsyncClient,
    key_client: KeyClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
) -> None:
    agent = await create_agent()
    a, b = await key_client(), await key_client()
    scripted_llm.script(Turn(text="hello A"), Turn(text="again A"))
    conv, run = await chat(a, {"agent_id": agent["id"], "message": "hi"})

    assert_not_found(await b.get(f"/api/v1/conversations/{conv}"), "conversation", conv)
    assert_not_found(await b.get(f"/api/v1/runs/{run}"), "run", run)
    assert_not_found(await b.get(f"/api/v1/runs/{run}/events"), "run", run)
    assert_not_found(await b.post(f"/api/v1/runs/{run}/cancel"), "run", run)
    assert_not_found(await b.delete(f"/api/v1/conversations/{conv}"), "conversation", conv)
    cont = await b.post(
        "/api/v1/chat", json={"agent_id": agent["id"], "message": "mine?", "conversation_id": conv}
    )
    assert_not_found(cont, "conversation", conv)
    # exactly as for an unknown id
    ghost = str(uuid.uuid4())
    assert_not_found(await b.get(f"/api/v1/conversations/{ghost}"), "conversation", ghost)
    for path in ("/api/v1/runs", "/api/v1/conversations", "/api/v1/tool-calls"):
        assert (await b.get(path)).json()["total"] == 0, path

    # the owner reads, replays, continues; admin sees everything
    assert (await a.get(f"/api/v1/conversations/{conv}")).status_code == 200
    async with a.stream("GET", f"/api/v1/runs/{run}/events") as replay:
        assert (await read_sse(replay))[-1].event == "run_finished"
    assert (await a.post(f"/api/v1/runs/{run}/cancel")).status_code == 200
    await chat(a, {"agent_id": agent["id"], "message": "more", "conversation_id": conv})
    mine = (await a.get("/api/v1/runs", params={"conversation_id": conv})).json()
    assert mine["total"] == 2
    assert [r["conversation_id"] for r in mine["items"]] == [conv, conv]
    assert (await a.get("/api/v1/conversations")).json()["total"] == 1
    assert (await live.get(f"/api/v1/conversations/{conv}")).status_code == 200
    assert (await live.get(f"/api/v1/runs/{run}")).status_code == 200
    listed = (await live.get("/api/v1/runs", params={"conversation_id": conv})).json()
    assert listed["total"] == 2


async def test_a_conversation_with_a_user_needs_the_same_user(
    key_client: KeyClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    key = await key_client()
    scripted_llm.script(Turn(text="hi alice"), Turn(text="hi again alice"), Turn(text="bob's"))
    conv, run = await chat(key, {"agent_id": agent["id"], "message": "hi", "user": "alice"})
    alice, bob = {"X-Quiver-User": "alice"}, {"X-Quiver-User": "bob"}

    for headers in ({}, bob):
        path = f"/api/v1/conversations/{conv}"
        assert_not_found(await key.get(path, headers=headers), "conversation", conv)
        assert_not_found(await key.get(f"/api/v1/runs/{run}", headers=headers), "run", run)
        assert_not_found(await key.post(f"/api/v1/runs/{run}/cancel", headers=headers), "run", run)
        events = await key.get(f"/api/v1/runs/{run}/events", headers=headers)
        assert_not_found(events, "run", run)
        assert (await key.get("/api/v1/conversations", headers=headers)).json()["total"] == 0
    body = {"agent_id": agent["id"], "message": "me too", "conversation_id": conv}
    assert_not_found(
        await key.post("/api/v1/chat", json={**body, "user": "bob"}), "conversation", conv
    )
    assert_not_found(await key.post("/api/v1/chat", json=body), "conversation", conv)

    read = await key.get(f"/api/v1/conversations/{conv}", headers=alice)
    assert read.status_code == 200
    assert read.json()["user"] == "alice"
    assert (await key.get("/api/v1/conversations", headers=alice)).json()["total"] == 1
    assert (await key.get(f"/api/v1/runs/{run}", headers=alice)).json()["user"] == "alice"
    await chat(key, {**body, "user": "alice"})
    await chat(key, {"agent_id": agent["id"], "message": "new", "conversation_id": conv}, alice)
    # a body user that contradicts the header is refused, not silently picked
    clash = await key.post("/api/v1/chat", json={**body, "user": "bob"}, headers=alice)
    assert clash.status_code == 422
    assert clash.json()["error"] == "Invalid"


async def test_agent_ids_limit_which_agents_a_key_may_chat_with(
    live: httpx.AsyncClient,
    key_client: KeyClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
) -> None:
    allowed, other = await create_agent(), await create_agent()
    key = await key_client(agent_ids=[allowed["id"]])
    resp = await key.post("/api/v1/chat", json={"agent_id": other["id"], "message": "hi"})
    assert_not_found(resp, "agent", other["id"])
    scripted_llm.script(Turn(text="ok"))
    await chat(key, {"agent_id": allowed["id"], "message": "hi"})

    unknown = str(uuid.uuid4())
    bad = await live.post(
        "/api/v1/api-keys", json={"name": unique("k"), "agent_ids": [allowed["id"], unknown]}
    )
    assert bad.status_code == 422
    assert unknown in bad.json()["detail"]
    key_id = (await live.get("/api/v1/api-keys", params={"limit": 200})).json()
    assert any(k["agent_ids"] == [allowed["id"]] for k in key_id["items"])


async def test_operator_routes_show_runs_and_every_tool_call(
    live: httpx.AsyncClient,
    key_client: KeyClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
) -> None:
    token = "tok-tenancy-" + uuid.uuid4().hex
    connector = await live.post(
        "/api/v1/connectors",
        json={
            "name": unique("api"),
            "base_url": "https://api.example.test",
            "auth_type": "bearer",
            "credentials": {"token": token},
        },
    )
    assert connector.status_code == 201, connector.text
    skill = await live.post(
        "/api/v1/skills",
        json={"name": unique("sop"), "description": "An SOP", "content": "Do the thing."},
    )
    agent = await create_agent(
        skill_ids=[skill.json()["id"]], connector_ids=[connector.json()["id"]]
    )
    key, other = await key_client(), await key_client()
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("c1", "read_skill", {"name": skill.json()["name"]}),
                ("c2", "no_such_tool", {"secret": token}),
            ]
        ),
        Turn(text="done"),
    )
    conv, run = await chat(key, {"agent_id": agent["id"], "message": "go"})

    detail = (await key.get(f"/api/v1/runs/{run}")).json()
    assert detail["status"] == "completed"
    assert (detail["agent_id"], detail["conversation_id"]) == (agent["id"], conv)
    assert detail["iterations"] == 2
    assert detail["finished_at"]
    assert detail["started_at"]
    assert detail["usage"]["total_tokens"] > 0
    assert (detail["reason"], detail["escalated"]) == (None, False)
    filtered = await key.get(
        "/api/v1/runs", params={"agent_id": agent["id"], "status": "completed"}
    )
    assert [r["id"] for r in filtered.json()["items"]] == [run]
    assert (await key.get("/api/v1/runs", params={"status": "failed"})).json()["total"] == 0
    assert (await key.get("/api/v1/runs", params={"status": "bogus"})).status_code == 422

    calls = await _tool_calls(key, run, expect=2)
    by_name = {c["name"]: c for c in calls}
    assert by_name["read_skill"]["kind"] == "skill"
    assert by_name["read_skill"]["ok"] is True
    bad = by_name["no_such_tool"]
    assert (bad["kind"], bad["ok"], bad["status"]) == ("builtin", False, "error")
    assert bad["arguments"] == {"secret": "***"}
    assert token not in (await key.get("/api/v1/tool-calls")).text
    for c in calls:
        assert c["run_id"] == run
        assert c["latency_ms"] >= 0
        assert c["api_key_id"] == detail["api_key_id"]
    only_skill = await key.get("/api/v1/tool-calls", params={"run_id": run, "kind": "skill"})
    assert [c["name"] for c in only_skill.json()["items"]] == ["read_skill"]
    failed = await key.get("/api/v1/tool-calls", params={"run_id": run, "ok": "false"})
    assert [c["name"] for c in failed.json()["items"]] == ["no_such_tool"]
    named = await key.get("/api/v1/tool-calls", params={"name": "read_skill", "run_id": run})
    assert named.json()["total"] == 1
    assert (await other.get("/api/v1/tool-calls", params={"run_id": run})).json()["total"] == 0
    assert (await live.get("/api/v1/tool-calls", params={"run_id": run})).json()["total"] == 2
    assert (await key.get("/api/v1/tool-calls", params={"kind": "nope"})).status_code == 422


async def _tool_calls(client: httpx.AsyncClient, run: str, *, expect: int) -> list[Any]:
    """Audit rows are written off the call path: wait briefly for them."""
    for _ in range(100):
        page = (await client.get("/api/v1/tool-calls", params={"run_id": run})).json()
        if page["total"] >= expect:
            items: list[Any] = page["items"]
            return items
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {expect} audit rows for run {run}")


async def test_deleting_a_conversation_removes_its_runs_and_journal(
    key_client: KeyClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    key = await key_client()
    scripted_llm.script(Turn(text="one"), Turn(text="slow " * 200, token_delay_s=0.02))
    conv, run = await chat(key, {"agent_id": agent["id"], "message": "hi"})

    body = {"agent_id": agent["id"], "message": "again", "conversation_id": conv}
    async with key.stream("POST", "/api/v1/chat", json=body) as live_run:
        reader = SseReader(live_run)
        second = (await reader.read(stop_after=1))[0].data["run_id"]
        busy = await key.delete(f"/api/v1/conversations/{conv}")
        assert busy.status_code == 409
        assert busy.json()["error"] == "Conflict"
        await key.post(f"/api/v1/runs/{second}/cancel")
        assert (await reader.read())[-1].event == "run_finished"

    assert (await key.delete(f"/api/v1/conversations/{conv}")).status_code == 204
    assert_not_found(await key.get(f"/api/v1/conversations/{conv}"), "conversation", conv)
    for run_id in (run, second):
        assert_not_found(await key.get(f"/api/v1/runs/{run_id}"), "run", run_id)
        assert_not_found(await key.get(f"/api/v1/runs/{run_id}/events"), "run", run_id)
    assert (await key.get("/api/v1/runs", params={"conversation_id": conv})).json()["total"] == 0
    assert_not_found(await key.delete(f"/api/v1/conversations/{conv}"), "conversation", conv)
