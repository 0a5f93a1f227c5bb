"""A `tools/call` is answered only once its events are stored, on both stores.

The answer may be prepared while the call's journal write is in flight (`calls.py`), but
the client hears nothing before the write commits; when the write fails, the client gets a
JSON-RPC error instead of the result, and the call's audit row is kept all the same. The
failure here is real: a trigger in the database refuses the call's `tool_result` row.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from mcp_types import INTERNAL_ERROR

from app.config import Settings
from app.main import create_app
from app.mcpserver.state import parse_session_id
from app.mcpserver.transport import NOT_STORED
from tests.fixtures.database import migrated_postgres
from tests.fixtures.live import serve_app
from tests.mcp.servers import HttpMcpServer
from tests.mcpserver.conftest import app_fields
from tests.mcpserver.test_answers import AUTH, call, legacy_agent, opened, sse_messages

_PG_REFUSE = """
CREATE FUNCTION refuse_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind = 'tool_result' THEN RAISE EXCEPTION 'tool results refused by the test'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_results BEFORE INSERT ON run_events
    FOR EACH ROW EXECUTE FUNCTION refuse_results();
"""
_PG_SLOW = """
CREATE FUNCTION slow_results() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.kind = 'tool_result' THEN PERFORM pg_sleep(1); END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER slow_results BEFORE INSERT ON run_events
    FOR EACH ROW EXECUTE FUNCTION slow_results();
"""
_SQLITE_REFUSE = """
CREATE TRIGGER refuse_results BEFORE INSERT ON run_events WHEN NEW.kind = 'tool_result'
BEGIN SELECT RAISE(ABORT, 'tool results refused by the test'); END;
"""


async def refuse_tool_results(settings: Settings) -> None:
    """From now on the database refuses every `tool_result` event (a constraint-like error:
    the journal does not retry it)."""
    url = settings.database_url
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1]
        with sqlite3.connect(path) as db:
            db.executescript(_SQLITE_REFUSE)
        return
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn.execute(_PG_REFUSE)
    finally:
        await conn.close()


async def stored_kinds(settings: Settings, run_id: uuid.UUID) -> list[str]:
    """The kinds of the run's events in the database, in order."""
    url = settings.database_url
    query = "SELECT kind FROM run_events WHERE run_id = {} ORDER BY seq"
    if url.startswith("sqlite"):
        with contextlib.closing(sqlite3.connect(url.split("///", 1)[1])) as db:
            rows = db.execute(query.format("?"), (run_id.hex,)).fetchall()
        return [r[0] for r in rows]
    conn = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        return [r[0] for r in await conn.fetch(query.format("$1"), run_id)]
    finally:
        await conn.close()


async def test_the_answer_follows_the_stored_events_and_a_failed_write_is_an_error(
    served: tuple[str, Settings], upstream: HttpMcpServer
) -> None:
    base_url, settings = served
    async with httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as http:
        agent, prefix = await legacy_agent(http, upstream)
        path = f"/mcp/agents/{agent}"
        session = await opened(http, path)
        parsed = parse_session_id(session["Mcp-Session-Id"])
        assert parsed is not None
        run_id = parsed[0]

        for ident in range(2, 7):  # each answer finds its own events already stored
            answer = await http.post(
                path, json=call(ident, f"{prefix}echo", {"text": f"n{ident}"}), headers=session
            )
            assert answer.json()["result"]["content"][0]["text"] == f"n{ident}"
            kinds = await stored_kinds(settings, run_id)
            assert kinds.count("tool_result") == ident - 1, kinds

        await refuse_tool_results(settings)
        refused = await http.post(
            path, json=call(9, f"{prefix}echo", {"text": "lost"}), headers=session
        )
        assert refused.status_code == 200, refused.text
        (message,) = (
            [refused.json()]
            if refused.headers["content-type"] == "application/json"
            else sse_messages(refused.text)
        )
        assert message["id"] == 9
        assert "result" not in message, message
        assert message["error"] == {"code": INTERNAL_ERROR, "message": NOT_STORED}
        kinds = await stored_kinds(settings, run_id)
        assert kinds.count("tool_result") == 5, kinds

        deadline = time.monotonic() + 10
        texts: list[str] = []
        while time.monotonic() < deadline:  # the call ran: its audit row is kept
            rows = (await http.get("/api/v1/tool-calls", params={"limit": 50})).json()["items"]
            texts = [str(r.get("arguments")) for r in rows]
            if any("lost" in t for t in texts):
                break
            await asyncio.sleep(0.1)
        assert any("lost" in t for t in texts), texts


async def test_a_session_ended_while_its_call_commits_ends_after_the_call(
    tmp_path: Path, upstream: HttpMcpServer
) -> None:
    """The call returns before its events commit (its answer waits for them): a DELETE that
    comes meanwhile numbers `run_finished` after them, never over them."""
    async with (
        migrated_postgres(app_fields(tmp_path)) as settings,
        serve_app(create_app(settings)) as base_url,
        httpx.AsyncClient(base_url=base_url, headers=AUTH, timeout=30) as http,
    ):
        agent, prefix = await legacy_agent(http, upstream)
        path = f"/mcp/agents/{agent}"
        session = await opened(http, path)
        parsed = parse_session_id(session["Mcp-Session-Id"])
        assert parsed is not None
        conn = await asyncpg.connect(settings.database_url.replace("+asyncpg", ""))
        try:
            await conn.execute(_PG_SLOW)
            answer = asyncio.create_task(
                http.post(path, json=call(2, f"{prefix}echo", {"text": "x"}), headers=session)
            )
            sleeping = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
            deadline = time.monotonic() + 10
            while not await conn.fetchval(sleeping):  # the call's write is in flight
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            ended = await http.delete(path, headers=session)
            assert ended.status_code == 200, ended.text
            assert (await answer).json()["result"]["content"][0]["text"] == "x"
        finally:
            await conn.close()
        kinds = await stored_kinds(settings, parsed[0])
        assert kinds == ["run_started", "tool_call", "tool_result", "run_finished"], kinds
