"""The MCP endpoint with the official `mcp` client against a live Quiver (no model)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer
from tests.fixtures.live import SseReader, read_sse, serve_app
from tests.fixtures.served import INITIALIZE
from tests.mcp.servers import TIME_SERVER


@pytest.fixture(scope="module")
async def live_url(committing_settings: Settings) -> AsyncIterator[str]:
    settings = committing_settings.model_copy(
        update={
            "mcp_stdio_commands": [TIME_SERVER],
            "tool_timeout_s": 20.0,
            "egress_allow_cidrs": ["127.0.0.0/8"],  # the recording server lives there
        }
    )
    async with serve_app(create_app(settings)) as base_url:
        yield base_url


@pytest.fixture
async def admin(live_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=live_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


async def post(admin: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = await admin.post(f"/api/v1/{path}", json=body)
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()
    return data


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcpserver") / "shop.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
        conn.executemany(
            "INSERT INTO products (name, price) VALUES (?, ?)",
            [("kettle", 29.5), ("teapot", 18.0)],
        )
    return path


async def make_agent(
    admin: httpx.AsyncClient, shop_db: Path, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    skill = await post(
        admin,
        "skills",
        {"name": unique("brew"), "description": "How to brew tea", "content": "Steep 3 min."},
    )
    database = await post(
        admin, "databases", {"name": unique("shop"), "url": f"sqlite:///{shop_db}"}
    )
    introspected = await admin.post(f"/api/v1/databases/{database['id']}/introspect")
    assert introspected.status_code == 200, introspected.text
    clock = await post(
        admin,
        "mcp-servers",
        {"name": unique("clock"), "transport": "stdio", "command": TIME_SERVER},
    )
    refreshed = await admin.post(f"/api/v1/mcp-servers/{clock['id']}/refresh")
    assert refreshed.status_code == 200, refreshed.text
    created = await post(
        admin,
        "agents",
        {
            "name": unique("agent"),
            "instructions": "You answer questions about the tea shop.",
            "skill_ids": [skill["id"]],
            "database_ids": [database["id"]],
            "mcp_server_ids": [clock["id"]],
            "model_config_json": config or {},
        },
    )
    return created | {"skill": skill, "database": database, "clock": clock}


@contextlib.asynccontextmanager
async def connect(
    live_url: str, agent_name: str, token: str = ADMIN_TOKEN, **kwargs: Any
) -> AsyncIterator[Client]:
    """The official client over streamable HTTP with a bearer key."""
    headers = {"Authorization": f"Bearer {token}"}
    async with create_mcp_http_client(headers=headers) as http:
        url = f"{live_url}/mcp/agents/{agent_name}"
        async with Client(streamable_http_client(url, http_client=http), **kwargs) as client:
            yield client


def text(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def toolset(admin: httpx.AsyncClient, agent_id: str) -> list[dict[str, Any]]:
    response = await admin.get(f"/api/v1/agents/{agent_id}/toolset")
    assert response.status_code == 200, response.text
    tools: list[dict[str, Any]] = response.json()["tools"]
    return tools


def as_openai(tools: list[types.Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.input_schema,
            },
        }
        for t in tools
    ]


async def test_progressive_tools_match_the_toolset_preview_and_run_through_meta_tools(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)
    async with connect(live_url, agent["name"]) as client:
        assert client.instructions is not None
        assert client.instructions.startswith("You answer questions about the tea shop.")
        assert agent["skill"]["name"] in client.instructions
        listed = await client.list_tools()
        assert as_openai(listed.tools) == await toolset(admin, agent["id"])
        assert {t.name for t in listed.tools} == {
            "http_fetch",
            "recall_knowledge",
            "database",
            "mcp",
            "read_skill",
        }

        skill = await client.call_tool("read_skill", {"name": agent["skill"]["name"]})
        assert not skill.is_error
        assert "Steep 3 min." in text(skill)

        db = agent["database"]["name"]
        tables = await client.call_tool("database", {"subcommand": "discover", "database": db})
        assert not tables.is_error, text(tables)
        assert "products" in text(tables)
        rows = await client.call_tool(
            "database",
            {"subcommand": "query", "database": db, "sql": "SELECT name FROM products"},
        )
        assert not rows.is_error, text(rows)
        assert "kettle" in text(rows)
        refused = await client.call_tool(
            "database",
            {"subcommand": "query", "database": db, "sql": "DELETE FROM products"},
        )
        assert refused.is_error
        with sqlite3.connect(shop_db) as conn:
            assert conn.execute("SELECT count(*) FROM products").fetchone() == (2,)

        clock = agent["clock"]["name"]
        discovered = await client.call_tool("mcp", {"subcommand": "discover", "server": clock})
        assert "get_current_time" in text(discovered), text(discovered)
        now = await client.call_tool(
            "mcp",
            {
                "subcommand": "call",
                "server": clock,
                "tool": "get_current_time",
                "parameters": {"timezone": "UTC"},
            },
        )
        assert not now.is_error, text(now)
        assert "UTC" in text(now)

        wrong = await client.call_tool("database", {"subcommand": "nope"})
        assert wrong.is_error

    runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
    (run,) = runs["items"]
    assert (run["kind"], run["status"]) == ("mcp_session", "completed")
    kinds = await journal_kinds(admin, run["id"])
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert kinds.count("tool_call") == kinds.count("tool_result") == 7
    assert not {"model_delta", "message"} & set(kinds)
    calls = (await admin.get("/api/v1/tool-calls", params={"run_id": run["id"]})).json()
    assert calls["total"] == 7
    assert {c["name"] for c in calls["items"]} == {"read_skill", "database", "mcp"}


async def journal_kinds(admin: httpx.AsyncClient, run_id: str) -> list[str]:
    async with admin.stream("GET", f"/api/v1/runs/{run_id}/events") as response:
        assert response.status_code == 200
        events = await read_sse(response)
    return [e.event for e in events]


LEGACY = {
    "skill_tool_mode": "inline",
    "connector_tool_mode": "legacy",
    "database_tool_mode": "legacy",
    "mcp_tool_mode": "legacy",
}


async def test_legacy_mode_lists_one_tool_per_leaf_like_the_preview(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db, LEGACY)
    async with connect(live_url, agent["name"]) as client:
        assert client.instructions is not None
        assert "Steep 3 min." in client.instructions  # inline skills live in the prompt
        listed = await client.list_tools()
        assert as_openai(listed.tools) == await toolset(admin, agent["id"])
        names = {t.name for t in listed.tools}
        assert not names & {"database", "mcp", "read_skill"}
        (time_tool,) = [n for n in names if n.endswith("get_current_time")]
        now = await client.call_tool(time_tool, {"timezone": "UTC"})
        assert not now.is_error, text(now)
        assert "UTC" in text(now)
        (query_tool,) = [n for n in names if n.endswith("query") and n.startswith("shop")]
        refused = await client.call_tool(query_tool, {"sql": "DROP TABLE products"})
        assert refused.is_error
        with sqlite3.connect(shop_db) as conn:
            assert conn.execute("SELECT count(*) FROM products").fetchone() == (2,)


async def test_request_tools_loads_tools_and_notifies_the_client(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    config = LEGACY | {"tool_selection_threshold": 2, "tool_selection_max": 2}
    agent = await make_agent(admin, shop_db, config)
    changed: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message.method)

    async with connect(live_url, agent["name"], message_handler=on_message) as client:
        first = await client.list_tools()
        assert as_openai(first.tools) == await toolset(admin, agent["id"])
        visible = {t.name for t in first.tools}
        assert "request_tools" in visible
        full = (await admin.get(f"/api/v1/agents/{agent['id']}/toolset")).json()
        assert full["selection"]["deferred"], full["selection"]
        wanted = full["selection"]["deferred"][0]
        before = await client.call_tool(wanted, {})
        assert before.is_error
        assert "request_tools" in text(before)
        loaded = await client.call_tool("request_tools", {"tool_names": [wanted]})
        assert not loaded.is_error, text(loaded)
        after = await client.list_tools()
        assert {t.name for t in after.tools} == visible | {wanted}
        for _ in range(100):
            if changed:
                break
            await asyncio.sleep(0.02)
        assert changed == ["notifications/tools/list_changed"]


MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


async def make_key(admin: httpx.AsyncClient, **fields: Any) -> str:
    created = await post(admin, "api-keys", {"name": unique("key"), "scopes": ["chat"], **fields})
    key: str = created["key"]
    return key


async def test_wrong_keys_and_agents_are_refused_before_any_mcp_exchange(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)
    other = await post(admin, "agents", {"name": unique("other")})
    url = f"{live_url}/mcp/agents/{agent['name']}"
    async with httpx.AsyncClient(timeout=30) as raw:
        missing = await raw.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert missing.status_code == 401
        assert missing.json()["error"] == "Unauthorized"
        bad = await raw.post(
            url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": "Bearer qv_nope"}
        )
        assert bad.status_code == 401
        limited = await make_key(admin, agent_ids=[other["id"]])
        auth = MCP_HEADERS | {"Authorization": f"Bearer {limited}"}
        refused = await raw.post(url, json=INITIALIZE, headers=auth)
        assert (refused.status_code, refused.json()["error"]) == (404, "NotFound")
        unknown = await raw.post(
            f"{live_url}/mcp/agents/{unique('ghost')}", json=INITIALIZE, headers=auth
        )
        assert unknown.status_code == 404
    runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
    assert runs["total"] == 0

    allowed = await make_key(admin, agent_ids=[agent["id"]])
    async with connect(live_url, agent["name"], token=allowed) as client:
        assert {t.name for t in (await client.list_tools()).tools} >= {"read_skill"}


async def test_a_session_cannot_be_used_with_another_key(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)
    mine, theirs = await make_key(admin), await make_key(admin)
    url = f"{live_url}/mcp/agents/{agent['name']}"
    async with httpx.AsyncClient(timeout=30) as raw:
        opened = await raw.post(
            url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {mine}"}
        )
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        stolen = await raw.post(
            url,
            json=listing,
            headers=MCP_HEADERS
            | {"Authorization": f"Bearer {theirs}", "Mcp-Session-Id": session_id},
        )
        assert stolen.status_code == 404


async def test_sessions_run_side_by_side_as_separate_runs(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)

    async def session(index: int) -> str:
        async with connect(live_url, agent["name"]) as client:
            result = await client.call_tool("read_skill", {"name": agent["skill"]["name"]})
            return text(result)

    results = await asyncio.gather(*(session(i) for i in range(4)))
    assert all("Steep 3 min." in r for r in results)
    runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
    assert runs["total"] == 4
    assert {(r["kind"], r["status"]) for r in runs["items"]} == {("mcp_session", "completed")}


async def test_an_idle_session_ends_and_finishes_its_run(
    committing_settings: Settings, shop_db: Path
) -> None:
    settings = committing_settings.model_copy(update={"mcp_session_idle_s": 0.5})
    async with (
        serve_app(create_app(settings)) as url,
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        ) as admin,
    ):
        skill = await post(
            admin, "skills", {"name": unique("idle"), "description": "d", "content": "c"}
        )
        agent = await post(admin, "agents", {"name": unique("idle"), "skill_ids": [skill["id"]]})
        opened = await admin.post(
            f"/mcp/agents/{agent['name']}", json=INITIALIZE, headers=MCP_HEADERS
        )
        assert opened.status_code == 200, opened.text
        session_id = opened.headers["mcp-session-id"]
        run = None
        for _ in range(100):
            runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
            (run,) = runs["items"]
            if run["status"] != "running":
                break
            await asyncio.sleep(0.05)
        assert run is not None
        assert (run["kind"], run["status"]) == ("mcp_session", "completed")
        assert (await journal_kinds(admin, run["id"]))[-1] == "run_finished"
        gone = await admin.post(
            f"/mcp/agents/{agent['name']}",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers=MCP_HEADERS | {"Mcp-Session-Id": session_id},
        )
        assert gone.status_code == 404


async def test_openai_agents_sdk_lists_and_calls_through_the_endpoint(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    from agents.mcp import MCPServerStreamableHttp

    agent = await make_agent(admin, shop_db)
    server = MCPServerStreamableHttp(
        params={
            "url": f"{live_url}/mcp/agents/{agent['name']}",
            "headers": {"Authorization": f"Bearer {ADMIN_TOKEN}"},
        },
        client_session_timeout_seconds=30,
    )
    async with server:
        tools = await server.list_tools()
        assert {t.name for t in tools} == {
            "http_fetch",
            "recall_knowledge",
            "database",
            "mcp",
            "read_skill",
        }
        by_name = {t.name: t for t in tools}
        preview = {t["function"]["name"]: t for t in await toolset(admin, agent["id"])}
        assert by_name["database"].input_schema == preview["database"]["function"]["parameters"]
        skill = await server.call_tool("read_skill", {"name": agent["skill"]["name"]})
        assert not skill.is_error
        assert "Steep 3 min." in "".join(getattr(c, "text", "") for c in skill.content)
        clock = agent["clock"]["name"]
        now = await server.call_tool(
            "mcp",
            {
                "subcommand": "call",
                "server": clock,
                "tool": "get_current_time",
                "parameters": {"timezone": "UTC"},
            },
        )
        assert not now.is_error
    runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
    (run,) = runs["items"]
    assert (run["kind"], run["status"]) == ("mcp_session", "completed")
    kinds = await journal_kinds(admin, run["id"])
    assert kinds.count("tool_result") == 2


@pytest.fixture(scope="module")
def recorder() -> Iterator[LocalServer]:
    server = LocalServer().start()
    yield server
    server.stop()


async def test_connector_discover_then_execute_reaches_the_upstream(
    admin: httpx.AsyncClient, live_url: str, recorder: LocalServer
) -> None:
    connector = await post(
        admin,
        "connectors",
        {
            "name": unique("tracker"),
            "description": "Issue tracker",
            "base_url": recorder.url,
            "actions": [
                {
                    "name": "get_issue",
                    "description": "Fetch one issue",
                    "method": "GET",
                    "path": "/repos/{repo}/issues/{number}",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "repo": {"type": "string"},
                            "number": {"type": "integer"},
                        },
                        "required": ["repo", "number"],
                    },
                }
            ],
        },
    )
    agent = await post(
        admin, "agents", {"name": unique("agent"), "connector_ids": [connector["id"]]}
    )
    async with connect(live_url, agent["name"]) as client:
        assert "connector" in {t.name for t in (await client.list_tools()).tools}
        found = await client.call_tool(
            "connector",
            {"subcommand": "discover", "connector": connector["name"], "action": "get_issue"},
        )
        assert not found.is_error, text(found)
        assert "repo" in text(found)
        done = await client.call_tool(
            "connector",
            {
                "subcommand": "execute",
                "connector": connector["name"],
                "action": "get_issue",
                "parameters": {"repo": "quiver", "number": 7},
            },
        )
        assert not done.is_error, text(done)
        assert recorder.last["path"] == "/repos/quiver/issues/7"
        invalid = await client.call_tool(
            "connector",
            {
                "subcommand": "execute",
                "connector": connector["name"],
                "action": "get_issue",
                "parameters": {"repo": "quiver"},
            },
        )
        assert invalid.is_error
        assert len(recorder.log) == 1


async def test_a_key_over_its_run_rate_gets_429_before_any_mcp_exchange(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)
    key = await make_key(admin, rate_limit_per_minute=1)
    async with connect(live_url, agent["name"], token=key) as client:
        assert (await client.list_tools()).tools
    async with httpx.AsyncClient(timeout=30) as raw:
        refused = await raw.post(
            f"{live_url}/mcp/agents/{agent['name']}",
            json=INITIALIZE,
            headers=MCP_HEADERS | {"Authorization": f"Bearer {key}"},
        )
    assert (refused.status_code, refused.json()["error"]) == (429, "RateLimited")
    assert "mcp-session-id" not in refused.headers
    runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
    assert runs["total"] == 1


async def test_calls_that_need_approval_ask_through_elicitation_or_fail_clearly(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db, {"approval": {"tools": ["read_skill"]}})
    skill = agent["skill"]["name"]
    asked: list[str] = []
    answers = iter(
        [
            types.ElicitResult(action="accept", content={"approve": True}),
            types.ElicitResult(action="accept", content={"approve": False, "reason": "not now"}),
        ]
    )

    async def person(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return next(answers)

    async with connect(live_url, agent["name"], elicitation_callback=person) as client:
        approved = await client.call_tool("read_skill", {"name": skill})
        assert not approved.is_error, text(approved)
        assert "Steep 3 min." in text(approved)
        denied = await client.call_tool("read_skill", {"name": skill})
        assert denied.is_error
        assert "Denied by a person: not now" in text(denied)
    assert len(asked) == 2
    assert skill in asked[0]

    # A client without the elicitation capability cannot ask anyone: the call does not run.
    async with connect(live_url, agent["name"]) as client:
        refused = await client.call_tool("read_skill", {"name": skill})
        assert refused.is_error
        assert (
            "This tool needs a person's approval; use the chat API or a client that supports "
            "elicitation" in text(refused)
        )
        assert "Steep 3 min." not in text(refused)
        # Looking never waits.
        discover = await client.call_tool(
            "database", {"subcommand": "discover", "database": agent["database"]["name"]}
        )
        assert not discover.is_error, text(discover)


async def _open_raw(
    raw: httpx.AsyncClient, url: str, key: str, capabilities: dict[str, Any]
) -> tuple[httpx.Response, dict[str, str]]:
    """`initialize` and `notifications/initialized` by hand: (the opening answer, headers for
    the session's next requests)."""
    body = INITIALIZE | {"params": INITIALIZE["params"] | {"capabilities": capabilities}}
    auth = MCP_HEADERS | {"Authorization": f"Bearer {key}"}
    opened = await raw.post(url, json=body, headers=auth)
    assert opened.status_code == 200, opened.text
    headers = auth | {
        "Mcp-Session-Id": opened.headers["mcp-session-id"],
        "Mcp-Protocol-Version": "2025-06-18",
    }
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await raw.post(url, json=initialized, headers=headers)).status_code == 202
    return opened, headers


async def test_a_revoked_key_stops_working_on_an_open_session(
    admin: httpx.AsyncClient, live_url: str, shop_db: Path
) -> None:
    agent = await make_agent(admin, shop_db)
    created = await post(admin, "api-keys", {"name": unique("key"), "scopes": ["chat"]})
    url = f"{live_url}/mcp/agents/{agent['name']}"
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with httpx.AsyncClient(timeout=30) as raw:
        _opened, headers = await _open_raw(raw, url, created["key"], {})
        assert (await raw.post(url, json=listing, headers=headers)).status_code == 200
        revoked = await admin.delete(f"/api/v1/api-keys/{created['id']}")
        assert revoked.status_code == 204
        refused = await raw.post(url, json=listing, headers=headers)
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"] == "Unauthorized"


async def test_a_slow_call_is_in_the_journal_while_it_runs(
    admin: httpx.AsyncClient, live_url: str, recorder: LocalServer
) -> None:
    """A quick call's `tool_call` is journaled with its result, in one write; a slow one's
    is stored on its own while the call runs, so the run shows the call in flight."""
    connector = await post(
        admin,
        "connectors",
        {
            "name": unique("sloth"),
            "description": "Answers slowly",
            "base_url": recorder.url,
            "actions": [
                {
                    "name": "wait",
                    "description": "Answer after `delay` seconds",
                    "method": "GET",
                    "path": "/slow",
                    "parameters": {
                        "type": "object",
                        "properties": {"delay": {"type": "number"}},
                        "required": ["delay"],
                    },
                }
            ],
        },
    )
    agent = await post(
        admin, "agents", {"name": unique("agent"), "connector_ids": [connector["id"]]}
    )
    execute = {
        "subcommand": "execute",
        "connector": connector["name"],
        "action": "wait",
        "parameters": {"delay": 4},
    }
    async with connect(live_url, agent["name"]) as client:
        discover = {"subcommand": "discover", "connector": connector["name"], "action": "wait"}
        assert not (await client.call_tool("connector", discover)).is_error
        runs = (await admin.get("/api/v1/runs", params={"agent_id": agent["id"]})).json()
        (run,) = runs["items"]
        call = asyncio.create_task(client.call_tool("connector", execute))
        async with admin.stream("GET", f"/api/v1/runs/{run['id']}/events") as response:
            reader = SseReader(response)
            kinds: list[str] = []
            while kinds.count("tool_call") < 2:  # the discover's, then the slow one's
                (event,) = await asyncio.wait_for(reader.read(stop_after=1), 3.0)
                kinds.append(event.event)
        assert not call.done()  # seen in flight
        assert kinds[-1] == "tool_call"
        done = await call
        assert not done.is_error, text(done)
