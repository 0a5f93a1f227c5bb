"""The MCP endpoint's edges: body sizes, malformed ids, the open-session cap per key, and a
call left in flight by a worker that was killed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.mcpserver.store import LOST_CALL
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer
from tests.fixtures.database import create_database, drop_database
from tests.fixtures.live import serve_app
from tests.fixtures.served import ADMIN_TOKEN as SERVED_TOKEN
from tests.fixtures.served import INITIALIZE, clean_env, quiver_serve
from tests.mcpserver.test_endpoint import MCP_HEADERS, _open_raw, post, unique
from tests.mcpserver.test_workers import journal, run_row

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "app.cli", "serve"]


@pytest.fixture(scope="module")
async def live(committing_settings: Settings) -> AsyncIterator[str]:
    settings = committing_settings.model_copy(
        update={"max_body_bytes": 6_000_000, "mcp_sessions_per_key": 2}
    )
    async with serve_app(create_app(settings)) as base_url:
        yield base_url


@pytest.fixture
async def admin(live: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live, headers=AUTH, timeout=30) as client:
        yield client


async def _agent(admin: httpx.AsyncClient) -> str:
    name: str = (await post(admin, "agents", {"name": unique("edge")}))["name"]
    return name


async def _key(admin: httpx.AsyncClient) -> str:
    created = await post(admin, "api-keys", {"name": unique("key"), "scopes": ["chat"]})
    key: str = created["key"]
    return key


async def test_a_body_under_the_limit_is_served_and_one_over_it_gets_the_usual_413(
    admin: httpx.AsyncClient, live: str
) -> None:
    """The SDK's own 4 MiB limit answered plain text below the app's limit (here 6 MB)."""
    url = f"{live}/mcp/agents/{await _agent(admin)}"
    async with httpx.AsyncClient(timeout=60) as raw:
        _opened, headers = await _open_raw(raw, url, await _key(admin), {})
        headers |= {"Content-Type": "application/json"}
        padded = LISTING | {"params": {"_meta": {"pad": "x" * 5_000_000}}}
        listed = await raw.post(url, content=json.dumps(padded), headers=headers)
        assert listed.status_code == 200, listed.text[:300]
        assert '"tools"' in listed.text
        huge = LISTING | {"params": {"_meta": {"pad": "x" * 6_100_000}}}
        refused = await raw.post(url, content=json.dumps(huge), headers=headers)
        assert refused.status_code == 413
        assert refused.json()["error"] == "PayloadTooLarge"
        assert "QUIVER_MAX_BODY_BYTES" in refused.json()["detail"]


@pytest.mark.parametrize("ident", [{"a": 1}, [1], True, 1.5, None])
async def test_a_request_whose_id_is_not_a_string_or_integer_is_an_invalid_request(
    admin: httpx.AsyncClient, live: str, ident: object
) -> None:
    url = f"{live}/mcp/agents/{await _agent(admin)}"
    async with httpx.AsyncClient(timeout=30) as raw:
        _opened, headers = await _open_raw(raw, url, await _key(admin), {})
        for body, extra in ((LISTING, headers), (INITIALIZE, MCP_HEADERS | AUTH)):
            sent = {**body, "id": ident}
            answered = await raw.post(url, json=sent, headers=extra)
            assert answered.status_code == 400, answered.text
            error = answered.json()
            assert error["error"]["code"] == -32600, error
            assert error["id"] is None
        # A notification (no id at all) is still accepted.
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await raw.post(url, json=note, headers=headers)).status_code == 202


async def test_open_sessions_are_capped_per_key(admin: httpx.AsyncClient, live: str) -> None:
    url = f"{live}/mcp/agents/{await _agent(admin)}"
    made = [
        await post(admin, "api-keys", {"name": unique("key"), "scopes": ["chat"]}) for _ in "ab"
    ]
    key, other = made[0]["key"], made[1]["key"]
    key_ids = {m["key"]: m["id"] for m in made}
    async with httpx.AsyncClient(timeout=30) as raw:
        _first, first = await _open_raw(raw, url, key, {})
        await _open_raw(raw, url, key, {})
        auth = MCP_HEADERS | {"Authorization": f"Bearer {key}"}
        refused = await raw.post(url, json=INITIALIZE, headers=auth)
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"] == "RateLimited"
        assert "QUIVER_MCP_SESSIONS_PER_KEY" in refused.json()["detail"]
        assert int(refused.headers["retry-after"]) > 0
        assert "mcp-session-id" not in refused.headers
        await _open_raw(raw, url, other, {})  # another key has its own sessions
        assert (await raw.delete(url, headers=first)).status_code == 200
        await _open_raw(raw, url, key, {})  # one ended: room for one more
    runs = (await admin.get("/api/v1/runs", params={"limit": 200})).json()["items"]
    ours = [r for r in runs if r["api_key_id"] in (key_ids[key], key_ids[other])]
    assert len(ours) == 4, "three sessions of one key (one ended), one of the other"
    assert all(r["status"] in ("running", "completed") for r in ours)


# --- a worker killed with a call in flight -------------------------------------------------


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    name = await create_database("quiver_edges")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        await drop_database(name)


@pytest.fixture(scope="module")
def upstream() -> Iterator[LocalServer]:
    server = LocalServer().start()
    yield server
    server.stop()


@pytest.mark.timeout(300)
async def test_a_call_left_in_flight_by_a_killed_worker_is_closed_on_takeover(
    pg_url: str, tmp_path: Path, upstream: LocalServer
) -> None:
    env = clean_env(
        QUIVER_DATABASE_URL=pg_url,
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_EGRESS_ALLOW_CIDRS="127.0.0.0/8",
        QUIVER_TOOL_TIMEOUT_S="60",
        QUIVER_WORKER_HEARTBEAT_S="0.5",
        QUIVER_WORKER_LOST_AFTER_S="2",
        PYTHONPATH=str(ROOT),
    )
    headers = {"Authorization": f"Bearer {SERVED_TOKEN}"}
    with contextlib.ExitStack() as stack:
        one = stack.enter_context(quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120))
        two = stack.enter_context(quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120))
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            admin = httpx.AsyncClient(base_url=one.base_url, headers=headers, timeout=60)
            async with admin:
                connector = await post(admin, "connectors", _slow_connector(upstream.url))
                agent = await post(
                    admin, "agents", {"name": unique("doomed"), "connector_ids": [connector["id"]]}
                )
            path = f"/mcp/agents/{agent['name']}"
            opened = await http.post(
                one.base_url + path, json=INITIALIZE, headers=MCP_HEADERS | headers
            )
            assert opened.status_code == 200, opened.text
            session_id = opened.headers["mcp-session-id"]
            run_id = str(uuid.UUID(hex=session_id[:32]))
            session = (
                MCP_HEADERS
                | headers
                | {
                    "Mcp-Session-Id": session_id,
                    "Mcp-Protocol-Version": "2025-06-18",
                }
            )
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "connector",
                    "arguments": {
                        "subcommand": "execute",
                        "connector": connector["name"],
                        "action": "wait",
                        "parameters": {"delay": 30},
                    },
                },
            }
            in_flight = asyncio.create_task(
                http.post(one.base_url + path, json=call, headers=session)
            )
            for _ in range(200):  # the call's `tool_call` is stored while it runs
                if "tool_call" in [kind for _, kind, _ in await journal(pg_url, run_id)]:
                    break
                await asyncio.sleep(0.05)
            one.proc.send_signal(signal.SIGKILL)
            one.proc.wait(timeout=30)
            with contextlib.suppress(httpx.HTTPError):
                await in_flight
            await asyncio.sleep(3)  # > QUIVER_WORKER_LOST_AFTER_S: worker 1 is judged dead
            listed = await http.post(two.base_url + path, json=LISTING, headers=session)
            assert listed.status_code == 200, listed.text
            events = await journal(pg_url, run_id)
            ended = await http.delete(two.base_url + path, headers=session)
            assert ended.status_code == 200
            finished = await run_row(pg_url, run_id)
            final = await journal(pg_url, run_id)
    kinds = [kind for _, kind, _ in events]
    assert kinds == ["run_started", "tool_call", "tool_result"], kinds
    result = json.loads(events[-1][2])
    call_event = json.loads(events[1][2])
    assert result["call_id"] == call_event["call_id"]
    assert (result["ok"], result["error"]) == (False, LOST_CALL)
    assert [kind for _, kind, _ in final] == [*kinds, "run_finished"]
    assert [seq for seq, _, _ in final] == [1, 2, 3, 4]
    assert (finished["status"], finished["iterations"]) == ("completed", 1)


def _slow_connector(base_url: str) -> dict[str, Any]:
    return {
        "name": unique("sloth"),
        "description": "Answers slowly",
        "base_url": base_url,
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
    }
