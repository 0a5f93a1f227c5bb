"""Human approval over real SSE: a scripted LLM, a live Quiver, a live HTTP upstream and real
databases; decisions through `POST /api/v1/runs/{run_id}/approvals/{approval_id}`."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from app.approvals.models import Approval
from app.chat.models import Run
from app.config import Settings
from app.db.base import utcnow
from app.db.engine import create_engine, create_sessionmaker
from app.main import create_app
from tests.chat.conftest import CreateAgent, unique
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.database import create_database, drop_database
from tests.fixtures.live import SseEvent, SseReader, of_kind, read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn, tool_observations

REPO = Path(__file__).resolve().parents[2]
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
HITS: list[dict[str, Any]] = []
"""Every request the upstream received (the side effect that must happen once, or never)."""


async def _tickets(request: Request) -> JSONResponse:
    body = await request.json() if request.method == "POST" else None
    HITS.append({"path": request.url.path, "body": body})
    return JSONResponse({"created": len(HITS)})


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    app = Starlette(routes=[Route("/{kind}", _tickets, methods=["POST", "GET"])])
    async with serve_app(app) as base_url:  # type: ignore[arg-type]
        yield base_url


LIVE_SETTINGS = {
    "egress_allow_cidrs": ["127.0.0.0/8"],
    "mcp_stdio_commands": [sys.executable],
}
"""The live Quiver (tests/chat/conftest.py) reaches this module's upstream and stdio servers."""


# --- helpers -----------------------------------------------------------------------------------


def post_action(name: str, *, confirm: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "method": "POST",
        "path": f"/{name}",
        "parameters": {
            "type": "object",
            "properties": {"title": {"type": "string", "x-location": "body"}},
        },
        "requires_confirmation": confirm,
    }


async def make_connector(
    live: httpx.AsyncClient, base_url: str, *actions: dict[str, Any]
) -> tuple[str, str]:
    """(name, id) of a new connector to the upstream."""
    resp = await live.post(
        "/api/v1/connectors",
        json={"name": unique("desk"), "base_url": base_url, "actions": list(actions)},
    )
    assert resp.status_code == 201, resp.text
    return str(resp.json()["name"]), str(resp.json()["id"])


def execute(connector: str, action: str, title: str) -> dict[str, Any]:
    return {
        "subcommand": "execute",
        "connector": connector,
        "action": action,
        "parameters": {"title": title},
    }


async def until(reader: SseReader, kind: str, seen: list[SseEvent]) -> SseEvent:
    """Read until an event of `kind` arrives (collecting everything into `seen`)."""
    while True:
        batch = await asyncio.wait_for(reader.read(stop_after=1), 20)
        assert batch, f"the stream ended before {kind}: {[e.event for e in seen]}"
        seen.extend(batch)
        if batch[0].event == kind:
            return batch[0]


async def decide(
    client: httpx.AsyncClient, run_id: str, approval_id: str, decision: str, reason: str = ""
) -> httpx.Response:
    body: dict[str, Any] = {"decision": decision}
    if reason:
        body["reason"] = reason
    return await client.post(f"/api/v1/runs/{run_id}/approvals/{approval_id}", json=body)


# --- approve, deny, timeout --------------------------------------------------------------------


async def test_approve_runs_the_confirmed_action_exactly_once(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(connector_ids=[cid])
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("c1", "connector", execute(name, "open_ticket", "printer on fire"))]),
        Turn(text="done"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        reader = SseReader(resp)
        asked = await until(reader, "approval_requested", seen)
        run_id = seen[0].data["run_id"]
        assert asked.data["call_id"] == "c1"
        assert asked.data["name"] == "connector"
        assert asked.data["arguments"]["parameters"] == {"title": "printer on fire"}
        await asyncio.sleep(0.3)
        assert HITS == []  # nothing ran before the decision

        run = (await live.get(f"/api/v1/runs/{run_id}")).json()
        assert [a["id"] for a in run["pending_approvals"]] == [asked.data["approval_id"]]
        assert run["pending_approvals"][0]["target"] == f"connector:{name}/open_ticket"
        pending = (await live.get("/api/v1/approvals", params={"status": "pending"})).json()
        assert asked.data["approval_id"] in [a["id"] for a in pending["items"]]

        both = await asyncio.gather(
            decide(live, run_id, asked.data["approval_id"], "approve"),
            decide(live, run_id, asked.data["approval_id"], "approve"),
        )
        assert sorted(r.status_code for r in both) == [200, 409]
        ok = next(r for r in both if r.status_code == 200)
        assert ok.json()["status"] == "approved"
        seen += await reader.read()

    resolved = of_kind(seen, "approval_resolved")
    assert resolved == [
        {
            "approval_id": asked.data["approval_id"],
            "decision": "approve",
            "by": resolved[0]["by"],
            "reason": None,
        }
    ]
    assert resolved[0]["by"].startswith("key:")
    result = of_kind(seen, "tool_result")[0]
    assert result["ok"] is True
    assert result["output"] == 'HTTP 200 OK\n{"created":1}'
    assert seen[-1].event == "run_finished"
    assert len(HITS) == 1
    assert HITS[0]["body"] == {"title": "printer on fire"}

    again = await decide(live, run_id, asked.data["approval_id"], "deny")
    assert again.status_code == 409, again.text
    assert again.json()["error"] == "Conflict"
    assert (await live.get(f"/api/v1/runs/{run_id}")).json()["pending_approvals"] == []


async def test_deny_with_reason_is_the_observation_and_a_failed_attempt(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("delete_all"))
    agent = await create_agent(
        connector_ids=[cid],
        model_config_json={
            "approval": {"tools": ["connector:*/delete_*"]},
            "step_iteration": {"max_reattempts_per_step": 1, "on_limit_reached": "skip_step"},
        },
    )
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("d1", "connector", execute(name, "delete_all", "everything"))]),
        Turn(text="ok, I will not"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "wipe"}
    ) as resp:
        reader = SseReader(resp)
        asked = await until(reader, "approval_requested", seen)
        run_id = seen[0].data["run_id"]
        denied = await decide(live, run_id, asked.data["approval_id"], "deny", "too risky")
        assert denied.status_code == 200, denied.text
        seen += await reader.read()

    assert of_kind(seen, "approval_resolved")[0]["decision"] == "deny"
    assert of_kind(seen, "approval_resolved")[0]["reason"] == "too risky"
    assert HITS == []
    denied = tool_observations(scripted_llm, 1)["d1"]
    assert denied.startswith("Error: Denied by a person: too risky")
    limit = of_kind(seen, "step_limit_reached")
    assert [s["step_id"] for s in limit] == [f"connector:{name}/delete_all"]


async def test_an_mcp_tool_matching_a_glob_waits_and_others_do_not(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    created = await live.post(
        "/api/v1/mcp-servers",
        json={
            "name": unique("mcp"),
            "transport": "stdio",
            "command": sys.executable,
            "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
            "env": {"PYTHONPATH": str(REPO)},
        },
    )
    assert created.status_code == 201, created.text
    server = created.json()
    assert (await live.post(f"/api/v1/mcp-servers/{server['id']}/refresh")).status_code == 200
    agent = await create_agent(
        mcp_server_ids=[server["id"]], model_config_json={"approval": {"tools": ["mcp:*/echo"]}}
    )

    def call(tool: str, parameters: dict[str, Any]) -> dict[str, Any]:
        return {
            "subcommand": "call",
            "server": server["name"],
            "tool": tool,
            "parameters": parameters,
        }

    scripted_llm.script(
        Turn(
            tool_calls=[
                ("e1", "mcp", call("echo", {"text": "hello"})),
                ("a1", "mcp", call("add", {"a": 2, "b": 3})),
            ]
        ),
        Turn(text="done"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        reader = SseReader(resp)
        asked = await until(reader, "approval_requested", seen)
        assert asked.data["call_id"] == "e1"
        ok = await decide(live, seen[0].data["run_id"], asked.data["approval_id"], "approve")
        assert ok.json()["target"] == f"mcp:{server['name']}/echo"
        seen += await reader.read()
    assert [a["call_id"] for a in of_kind(seen, "approval_requested")] == ["e1"]
    results = {r["call_id"]: r for r in of_kind(seen, "tool_result")}
    assert results["a1"]["ok"] is True
    assert results["e1"]["ok"] is True
    assert "hello" in results["e1"]["output"]


async def test_discover_never_waits_even_when_a_glob_matches(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(
        connector_ids=[cid], model_config_json={"approval": {"tools": ["connector*"]}}
    )
    scripted_llm.script(
        Turn(tool_calls=[("s1", "connector", {"subcommand": "discover", "connector": name})]),
        Turn(text="seen"),
    )
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "look"}
    ) as resp:
        events = await read_sse(resp)
    assert of_kind(events, "approval_requested") == []
    assert of_kind(events, "tool_result")[0]["ok"] is True
    assert "[requires confirmation]" in of_kind(events, "tool_result")[0]["output"]


async def test_cancelling_the_run_closes_a_waiting_approval(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(connector_ids=[cid])
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("k1", "connector", execute(name, "open_ticket", "never"))]),
        Turn(text="should not be asked"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        reader = SseReader(resp)
        asked = await until(reader, "approval_requested", seen)
        run_id = seen[0].data["run_id"]
        assert (await live.post(f"/api/v1/runs/{run_id}/cancel")).status_code == 200
        seen += await reader.read()
    assert of_kind(seen, "approval_resolved")[0]["decision"] == "cancelled"
    assert seen[-1].data["status"] == "cancelled"
    late = await decide(live, run_id, asked.data["approval_id"], "approve")
    assert late.status_code == 409, late.text
    assert HITS == []


async def test_pre_hydration_never_runs_a_call_that_needs_approval(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    agent = await create_agent(
        model_config_json={
            "pre_hydration": {"resolution_tools": {"url": "http_fetch"}},
            "approval": {"tools": ["http_fetch"]},
        }
    )
    HITS.clear()
    scripted_llm.script(Turn(text="fine"))
    async with live.stream(
        "POST",
        "/api/v1/chat",
        json={"agent_id": agent["id"], "message": f"read {upstream}/page please"},
    ) as resp:
        events = await read_sse(resp)
    hydrated = of_kind(events, "pre_hydration_complete")[0]
    assert (hydrated["references_found"], hydrated["references_failed"]) == (1, 1)
    assert HITS == []


async def test_an_unanswered_approval_times_out(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(
        connector_ids=[cid], model_config_json={"approval": {"timeout_s": 1}}
    )
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("t1", "connector", execute(name, "open_ticket", "late"))]),
        Turn(text="nobody answered"),
    )
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        events = await read_sse(resp)
    asked = of_kind(events, "approval_requested")[0]
    assert of_kind(events, "approval_resolved")[0]["decision"] == "timeout"
    assert tool_observations(scripted_llm, 1)["t1"] == "Error: Approval timed out after 1 s"
    assert HITS == []
    late = await decide(live, events[0].data["run_id"], asked["approval_id"], "approve")
    assert late.status_code == 409, late.text
    assert HITS == []


async def test_approval_timeout_is_validated(live: httpx.AsyncClient) -> None:
    resp = await live.post(
        "/api/v1/agents",
        json={"name": unique("a"), "model_config_json": {"approval": {"timeout_s": 86_401}}},
    )
    assert resp.status_code == 422, resp.text
    assert "approval" in resp.json()["detail"]


# --- several at once, disconnects, ownership ---------------------------------------------------


async def test_two_approvals_in_one_turn_decided_in_reverse_order(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(
        live,
        upstream,
        post_action("first", confirm=True),
        post_action("second", confirm=True),
        post_action("free"),
    )
    agent = await create_agent(connector_ids=[cid])
    HITS.clear()
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("a", "connector", execute(name, "first", "one")),
                ("b", "connector", execute(name, "second", "two")),
                ("c", "connector", execute(name, "free", "three")),
            ]
        ),
        Turn(text="all done"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        reader = SseReader(resp)
        await until(reader, "approval_requested", seen)
        while len(of_kind(seen, "approval_requested")) < 2:
            await until(reader, "approval_requested", seen)
        run_id = seen[0].data["run_id"]
        asked = {a["call_id"]: a["approval_id"] for a in of_kind(seen, "approval_requested")}
        # the call that needs no approval went on meanwhile
        if not of_kind(seen, "tool_result"):
            await until(reader, "tool_result", seen)
        assert [r["call_id"] for r in of_kind(seen, "tool_result")] == ["c"]
        assert (await decide(live, run_id, asked["b"], "approve")).status_code == 200
        await until(reader, "tool_result", seen)
        assert [r["call_id"] for r in of_kind(seen, "tool_result")] == ["c", "b"]
        assert (await decide(live, run_id, asked["a"], "deny", "not this one")).status_code == 200
        seen += await reader.read()

    assert [r["call_id"] for r in of_kind(seen, "tool_result")] == ["c", "b", "a"]
    assert [h["path"] for h in HITS] == ["/free", "/second"]
    obs = tool_observations(scripted_llm, 1)
    assert obs["a"] == "Error: Denied by a person: not this one"
    assert obs["b"].startswith("HTTP 200 OK")


async def test_disconnect_then_decide_then_replay(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(connector_ids=[cid])
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("r1", "connector", execute(name, "open_ticket", "later"))]),
        Turn(text="finished without you"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
    ) as resp:
        await until(SseReader(resp), "approval_requested", seen)
    run_id = seen[0].data["run_id"]  # the client went away; the run waits on

    async with live.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
        reader = SseReader(resp)
        replayed: list[SseEvent] = []
        asked = await until(reader, "approval_requested", replayed)
        assert (await decide(live, run_id, asked.data["approval_id"], "approve")).status_code == 200
        replayed += await reader.read()
    kinds = [e.event for e in replayed]
    assert kinds.index("approval_requested") < kinds.index("approval_resolved")
    assert kinds.index("approval_resolved") < kinds.index("tool_result")
    assert kinds[-1] == "run_finished"
    assert len(HITS) == 1

    async with live.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
        full = await read_sse(resp)
    assert [e.event for e in full] == kinds


async def test_only_the_owner_or_an_admin_can_decide(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    name, cid = await make_connector(live, upstream, post_action("open_ticket", confirm=True))
    agent = await create_agent(connector_ids=[cid])
    keys = []
    for _ in range(2):
        created = await live.post(
            "/api/v1/api-keys", json={"name": unique("key"), "scopes": ["chat"]}
        )
        keys.append(created.json()["key"])
    HITS.clear()
    scripted_llm.script(
        Turn(tool_calls=[("o1", "connector", execute(name, "open_ticket", "mine"))]),
        Turn(text="ok"),
    )
    base = str(live.base_url)
    async with (
        httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {keys[0]}"}) as owner,
        httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {keys[1]}"}) as other,
    ):
        seen: list[SseEvent] = []
        async with owner.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as resp:
            reader = SseReader(resp)
            asked = await until(reader, "approval_requested", seen)
            run_id, approval_id = seen[0].data["run_id"], asked.data["approval_id"]
            stranger = await decide(other, run_id, approval_id, "approve")
            assert stranger.status_code == 404, stranger.text
            assert stranger.json() == {"error": "NotFound", "detail": f"run {run_id!r} not found"}
            theirs = (await other.get("/api/v1/approvals", params={"status": "pending"})).json()
            assert approval_id not in [a["id"] for a in theirs["items"]]
            mine = (await owner.get("/api/v1/approvals", params={"status": "pending"})).json()
            assert [a["id"] for a in mine["items"]] == [approval_id]
            unknown = await decide(owner, run_id, "00000000-0000-0000-0000-000000000000", "deny")
            assert unknown.status_code == 404, unknown.text
            assert (await decide(owner, run_id, approval_id, "approve")).status_code == 200
            seen += await reader.read()
    assert seen[-1].event == "run_finished"
    assert len(HITS) == 1


# --- database writes ---------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
async def writable_db(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[str, Any]]:
    """(URL, count of rows in `notes`) for a throwaway database with one table."""
    if request.param == "sqlite":
        path = tmp_path / "notes.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")

        async def sqlite_count() -> int:
            with sqlite3.connect(path) as conn:
                return int(conn.execute("SELECT count(*) FROM notes").fetchone()[0])

        yield f"sqlite:///{path}", sqlite_count
        return
    name = await create_database("quiver_approval")
    dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
    conn = await asyncpg.connect(dsn)
    await conn.execute("CREATE TABLE notes (id serial PRIMARY KEY, body text)")
    await conn.close()

    async def pg_count() -> int:
        c = await asyncpg.connect(dsn)
        try:
            return int(await c.fetchval("SELECT count(*) FROM notes"))
        finally:
            await c.close()

    try:
        yield dsn, pg_count
    finally:
        await drop_database(name)


async def test_a_database_write_runs_only_after_approval_and_once(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    writable_db: tuple[str, Any],
) -> None:
    url, count = writable_db
    db = await live.post(
        "/api/v1/databases", json={"name": unique("notes"), "url": url, "read_only": False}
    )
    assert db.status_code == 201, db.text
    agent = await create_agent(database_ids=[db.json()["id"]])
    insert = {
        "subcommand": "query",
        "database": db.json()["name"],
        "sql": "INSERT INTO notes (body) VALUES ('approved write')",
    }
    read = {
        "subcommand": "query",
        "database": db.json()["name"],
        "sql": "SELECT count(*) FROM notes",
    }
    scripted_llm.script(
        Turn(tool_calls=[("w1", "database", insert), ("q1", "database", read)]),
        Turn(text="written"),
    )
    seen: list[SseEvent] = []
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "write"}
    ) as resp:
        reader = SseReader(resp)
        asked = await until(reader, "approval_requested", seen)
        assert asked.data["call_id"] == "w1"  # the read does not wait
        if not of_kind(seen, "tool_result"):
            await until(reader, "tool_result", seen)
        assert of_kind(seen, "tool_result")[0]["call_id"] == "q1"
        await asyncio.sleep(0.3)
        assert await count() == 0
        run_id = seen[0].data["run_id"]
        ok = await decide(live, run_id, asked.data["approval_id"], "approve")
        assert ok.status_code == 200, ok.text
        seen += await reader.read()
    write = next(r for r in of_kind(seen, "tool_result") if r["call_id"] == "w1")
    assert write["ok"] is True, write
    assert await count() == 1
    assert (await decide(live, run_id, asked.data["approval_id"], "approve")).status_code == 409
    assert await count() == 1


async def test_ddl_stays_refused_on_a_writable_database(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    tmp_path: Path,
) -> None:
    path = tmp_path / "ddl.db"
    sqlite3.connect(path).close()
    db = await live.post(
        "/api/v1/databases",
        json={"name": unique("ddl"), "url": f"sqlite:///{path}", "read_only": False},
    )
    agent = await create_agent(database_ids=[db.json()["id"]])
    drop = {"subcommand": "query", "database": db.json()["name"], "sql": "DROP TABLE x"}
    scripted_llm.script(Turn(tool_calls=[("x1", "database", drop)]), Turn(text="no"))
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "drop"}
    ) as resp:
        events = await read_sse(resp)
    assert of_kind(events, "approval_requested") == []
    result = of_kind(events, "tool_result")[0]
    assert result["ok"] is False
    assert "[SQL Safety Error]" in result["error"]


# --- across workers ----------------------------------------------------------------------------


async def test_a_decision_on_another_worker_reaches_the_waiting_call(
    committing_settings: Settings,
    scripted_llm_session: ScriptedLLM,
    scripted_llm: ScriptedLLM,
    upstream: str,
) -> None:
    settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "egress_allow_cidrs": ["127.0.0.0/8"],
        }
    )
    async with (
        serve_app(create_app(settings)) as url_a,
        serve_app(create_app(settings)) as url_b,
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        name, cid = await make_connector(a, upstream, post_action("open_ticket", confirm=True))
        agent = (
            await a.post("/api/v1/agents", json={"name": unique("w"), "connector_ids": [cid]})
        ).json()
        HITS.clear()
        scripted_llm.script(
            Turn(tool_calls=[("x1", "connector", execute(name, "open_ticket", "cross"))]),
            Turn(text="ok"),
        )
        seen: list[SseEvent] = []
        async with a.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as resp:
            reader = SseReader(resp)
            asked = await until(reader, "approval_requested", seen)
            run_id = seen[0].data["run_id"]
            decided = await decide(b, run_id, asked.data["approval_id"], "approve")
            assert decided.status_code == 200, decided.text
            resolved = await asyncio.wait_for(until(reader, "approval_resolved", seen), 10)
            assert resolved.data["decision"] == "approve"
            seen += await reader.read()
        assert seen[-1].event == "run_finished"
        assert len(HITS) == 1


# --- restarts ----------------------------------------------------------------------------------


async def test_a_restart_while_waiting_never_executes_the_call_later(
    committing_settings: Settings,
    scripted_llm_session: ScriptedLLM,
    scripted_llm: ScriptedLLM,
    upstream: str,
) -> None:
    settings = committing_settings.model_copy(
        update={
            "llm_base_url": scripted_llm_session.base_url,
            "egress_allow_cidrs": ["127.0.0.0/8"],
        }
    )
    seen: list[SseEvent] = []
    async with (
        serve_app(create_app(settings)) as url_a,
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
    ):
        name, cid = await make_connector(a, upstream, post_action("open_ticket", confirm=True))
        agent = (
            await a.post("/api/v1/agents", json={"name": unique("r"), "connector_ids": [cid]})
        ).json()
        HITS.clear()
        scripted_llm.script(
            Turn(tool_calls=[("z1", "connector", execute(name, "open_ticket", "restart"))]),
            Turn(text="after"),
        )
        async with a.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as resp:
            await until(SseReader(resp), "approval_requested", seen)
    # worker A stopped while the call waited; worker B takes the decision
    run_id = seen[0].data["run_id"]
    approval_id = seen[-1].data["approval_id"]
    async with (
        serve_app(create_app(settings)) as url_b,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        late = await decide(b, run_id, approval_id, "approve")
        assert late.status_code == 409, late.text
        run = (await b.get(f"/api/v1/runs/{run_id}")).json()
        assert run["status"] != "running"
        assert run["pending_approvals"] == []
        listed = (await b.get("/api/v1/approvals", params={"status": "cancelled"})).json()
        assert approval_id in [x["id"] for x in listed["items"]]
    await asyncio.sleep(0.3)
    assert HITS == []


async def test_a_run_lost_with_its_worker_leaves_nothing_to_decide(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> None:
    """A worker killed mid-wait: its run is closed as `run_lost`, its approval with it."""
    settings = committing_settings.model_copy(
        update={"llm_base_url": scripted_llm_session.base_url, "worker_heartbeat_s": 600.0}
    )
    engine = create_engine(settings)
    sessions = create_sessionmaker(engine)
    try:
        async with (
            serve_app(create_app(settings)) as url,
            httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as client,
        ):
            agent = (await client.post("/api/v1/agents", json={"name": unique("g")})).json()
            conversation = (
                await client.post("/api/v1/chat", json={"agent_id": agent["id"], "message": "hi"})
            ).headers.get("x-conversation-id")
            async with sessions() as session:
                run = Run(conversation_id=uuid.UUID(conversation), agent_id=uuid.UUID(agent["id"]))
                session.add(run)
                await session.flush()
                approval = Approval(
                    run_id=run.id,
                    call_id="k1",
                    name="connector",
                    target="connector:x/y",
                    arguments={},
                    reason="test",
                    expires_at=utcnow() + timedelta(minutes=5),
                )
                session.add(approval)
                await session.commit()
                run_id, approval_id = str(run.id), str(approval.id)
            pending = (await client.get(f"/api/v1/runs/{run_id}")).json()["pending_approvals"]
            assert [p["id"] for p in pending] == [approval_id]
            closed = await client.post(f"/api/v1/runs/{run_id}/cancel")  # closes the lost run
            assert closed.json()["status"] == "failed"
            late = await decide(client, run_id, approval_id, "approve")
            assert late.status_code == 409, late.text
            assert "cancelled" in late.json()["detail"]
    finally:
        await engine.dispose()
