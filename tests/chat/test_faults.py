"""Fault suite: real processes, real stores. Each fault must leave a contiguous journal that
ends in a terminal event, and a conversation that takes the next message.

Faults: Postgres restarting mid-run (a throwaway cluster of the test's own), the gateway
killed with SIGKILL and started again, a client disconnecting and resuming from every event
id, the LLM dropping its stream, an MCP server process crashing during a tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from tests.chat.conftest import unique
from tests.conftest import ADMIN_TOKEN, SECRET_KEY, migrated_sqlite
from tests.fixtures.live import SseEvent, SseReader, read_sse, serve_app
from tests.fixtures.pg_cluster import pg_cluster
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
TERMINAL = {"run_finished", "run_failed"}
REPO = Path(__file__).resolve().parents[2]
QUIVER = Path(sys.executable).parent / "quiver"


# --- helpers -----------------------------------------------------------------------------------


def assert_complete(events: list[SseEvent]) -> None:
    """Numbered 1..n without a gap, one terminal event, at the end."""
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].event == "run_started"
    assert events[-1].event in TERMINAL
    assert not [e for e in events[:-1] if e.event in TERMINAL]


async def replay(client: httpx.AsyncClient, run_id: str, after: int = 0) -> list[SseEvent]:
    headers = {"Last-Event-ID": str(after)} if after else {}
    async with client.stream("GET", f"/api/v1/runs/{run_id}/events", headers=headers) as resp:
        assert resp.status_code == 200
        return await asyncio.wait_for(read_sse(resp), 30)


async def assert_resumable(client: httpx.AsyncClient, run_id: str) -> list[SseEvent]:
    """The full replay is complete, and resuming after any event id gives the rest."""
    full = await replay(client, run_id)
    assert_complete(full)
    for after in range(1, len(full) + 1):
        assert await replay(client, run_id, after) == full[after:], f"resume after {after}"
    return full


async def chat(
    client: httpx.AsyncClient, agent_id: str, message: str, conversation_id: str | None = None
) -> list[SseEvent]:
    body: dict[str, Any] = {"agent_id": agent_id, "message": message}
    if conversation_id is not None:
        body["conversation_id"] = conversation_id
    async with client.stream("POST", "/api/v1/chat", json=body) as resp:
        assert resp.status_code == 200, (await resp.aread()).decode()
        return await asyncio.wait_for(read_sse(resp), 30)


async def assert_usable(
    client: httpx.AsyncClient, llm: ScriptedLLM, agent_id: str, conversation_id: str
) -> None:
    """The conversation takes the next message, and its history holds both."""
    llm.script(Turn(text="still here"))
    events = await chat(client, agent_id, "are you there?", conversation_id)
    assert_complete(events)
    assert events[-1].data["status"] == "completed"
    conv = (await client.get(f"/api/v1/conversations/{conversation_id}")).json()
    assert [m["role"] for m in conv["messages"]][-2:] == ["user", "assistant"]
    assert conv["messages"][-1]["content"] == "still here"
    assert all(run["status"] != "running" for run in conv["runs"])


async def new_agent(client: httpx.AsyncClient, **fields: Any) -> str:
    response = await client.post("/api/v1/agents", json={"name": unique("fault"), **fields})
    assert response.status_code == 201, response.text
    agent_id: str = response.json()["id"]
    return agent_id


@contextlib.asynccontextmanager
async def gateway(settings: Settings, **overrides: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway in this process on a real uvicorn server."""
    async with (
        serve_app(create_app(settings.model_copy(update=overrides))) as url,
        httpx.AsyncClient(base_url=url, headers=AUTH, timeout=30) as client,
    ):
        yield client


@pytest.fixture(params=["postgres", "sqlite"])
async def store(
    request: pytest.FixtureRequest,
    committing_settings: Settings,
    scripted_llm: ScriptedLLM,
    tmp_path: Path,
) -> Settings:
    """Settings for one store, with a fast heartbeat and the scripted LLM."""
    fast = {
        "llm_base_url": scripted_llm.base_url,
        "llm_max_retries": 1,
        "worker_heartbeat_s": 0.5,
        "worker_lost_after_s": 2.0,
    }
    if request.param == "postgres":
        return committing_settings.model_copy(update=fast)
    return await migrated_sqlite(tmp_path / "data", **fast)


# --- Postgres restarts mid-run -------------------------------------------------------------------


async def test_postgres_restart_mid_run_loses_no_event(
    scripted_llm: ScriptedLLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with pg_cluster() as cluster:
        settings = Settings(
            database_url=cluster.url,
            data_dir=tmp_path,
            admin_token=ADMIN_TOKEN,
            secret_keys=[SECRET_KEY],
            llm_base_url=scripted_llm.base_url,
            journal_retry_s=30.0,
        )
        await asyncio.to_thread(upgrade, settings)
        async with gateway(settings) as client:
            agent_id = await new_agent(client)
            scripted_llm.script(Turn(text="tick " * 60, token_delay_s=0.04))
            body = {"agent_id": agent_id, "message": "count"}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                run_id = resp.headers["x-run-id"]
                reader = SseReader(resp)
                live = await reader.read(stop_after=5)
                await asyncio.to_thread(cluster.restart)
                live += await asyncio.wait_for(reader.read(), 60)
            assert_complete(live)
            assert live[-1].data["status"] == "completed"
            deltas = "".join(e.data["text"] for e in live if e.event == "model_delta")
            assert deltas == "tick " * 60
            # the restart did hit the journal: some writes were retried
            assert any("retrying" in r.getMessage() for r in caplog.records)
            assert await replay(client, run_id) == live
            assert await replay(client, run_id, 6) == live[6:]
            await assert_usable(client, scripted_llm, agent_id, live[0].data["conversation_id"])


async def test_database_outage_does_not_make_live_workers_look_dead(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """Postgres is down longer than the lost-after period while a run goes on another worker:
    afterwards every heartbeat is old, yet the run is not closed as lost; it completes."""
    with pg_cluster() as cluster:
        settings = Settings(
            database_url=cluster.url,
            data_dir=tmp_path,
            admin_token=ADMIN_TOKEN,
            secret_keys=[SECRET_KEY],
            llm_base_url=scripted_llm.base_url,
            journal_retry_s=30.0,
            worker_lost_after_s=2.0,
        )
        await asyncio.to_thread(upgrade, settings)
        # `other` beats (and judges) right after the outage; the run's worker beats later.
        async with (
            gateway(settings, worker_heartbeat_s=1.5) as runner,
            gateway(settings, worker_heartbeat_s=0.2) as other,
        ):
            agent_id = await new_agent(runner)
            scripted_llm.script(Turn(text="tick " * 100, token_delay_s=0.05))
            body = {"agent_id": agent_id, "message": "count"}
            async with runner.stream("POST", "/api/v1/chat", json=body) as resp:
                run_id = resp.headers["x-run-id"]
                reader = SseReader(resp)
                live = await reader.read(stop_after=3)
                await asyncio.to_thread(cluster.stop)
                await asyncio.sleep(2.5)
                await asyncio.to_thread(cluster.start)
                live += await asyncio.wait_for(reader.read(), 60)
            assert_complete(live)
            assert live[-1].data["status"] == "completed"
            assert await replay(other, run_id) == live


async def test_database_down_past_the_retry_period_fails_the_run_without_a_gap(
    scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    """Storage stays away longer than `journal_retry_s`: the run stops, its live stream ends
    without showing anything unstored, and once storage is back the run is closed after its
    last stored event."""
    with pg_cluster() as cluster:
        settings = Settings(
            database_url=cluster.url,
            data_dir=tmp_path,
            admin_token=ADMIN_TOKEN,
            secret_keys=[SECRET_KEY],
            llm_base_url=scripted_llm.base_url,
            journal_retry_s=1.0,
            worker_heartbeat_s=0.3,
            worker_lost_after_s=1.0,
        )
        await asyncio.to_thread(upgrade, settings)
        async with gateway(settings) as client:
            agent_id = await new_agent(client)
            scripted_llm.script(Turn(text="tick " * 100, token_delay_s=0.05))
            body = {"agent_id": agent_id, "message": "count"}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                run_id = resp.headers["x-run-id"]
                conversation_id = resp.headers["x-conversation-id"]
                reader = SseReader(resp)
                live = await reader.read(stop_after=3)
                await asyncio.to_thread(cluster.stop)
                live += await asyncio.wait_for(reader.read(), 30)
            await asyncio.to_thread(cluster.start)
            final = await replay(client, run_id)
            assert_complete(final)
            assert final[: len(live)] == live
            assert final[-1].event == "run_failed"
            assert final[-1].data["error"]["code"] in {"journal_unavailable", "run_lost"}
            await assert_usable(client, scripted_llm, agent_id, conversation_id)


# --- the gateway is killed (SIGKILL) and started again -------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class GatewayProcess:
    """`quiver serve` in a child process."""

    def __init__(self, settings: Settings, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "QUIVER_DATABASE_URL": settings.database_url,
            "QUIVER_DATA_DIR": str(settings.data_dir),
            "QUIVER_ADMIN_TOKEN": ADMIN_TOKEN,
            "QUIVER_SECRET_KEYS": SECRET_KEY,
            "QUIVER_LLM_BASE_URL": settings.llm_base_url,
            "QUIVER_LLM_MAX_RETRIES": "1",
            "QUIVER_WORKER_HEARTBEAT_S": str(settings.worker_heartbeat_s),
            "QUIVER_WORKER_LOST_AFTER_S": str(settings.worker_lost_after_s),
            "QUIVER_LOG_LEVEL": "WARNING",
        }
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [str(QUIVER), "serve", "--port", str(self.port)],
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    async def ready(self) -> None:
        deadline = time.monotonic() + 60
        async with httpx.AsyncClient(base_url=self.url, timeout=2) as client:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, "the gateway exited during start-up"
                with contextlib.suppress(httpx.TransportError):
                    if (await client.get("/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise AssertionError("the gateway did not become ready")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


@contextlib.contextmanager
def processes() -> Iterator[list[GatewayProcess]]:
    started: list[GatewayProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.stop()


async def test_gateway_sigkill_mid_run_then_restart(
    store: Settings, scripted_llm: ScriptedLLM, tmp_path: Path
) -> None:
    log = tmp_path / "gateway.log"
    with processes() as procs:
        first = GatewayProcess(store, log)
        procs.append(first)
        await first.ready()
        async with httpx.AsyncClient(base_url=first.url, headers=AUTH, timeout=30) as client:
            agent_id = await new_agent(client)
            scripted_llm.script(Turn(text="slow " * 400, token_delay_s=0.05))
            body = {"agent_id": agent_id, "message": "a long answer please"}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                run_id = resp.headers["x-run-id"]
                conversation_id = resp.headers["x-conversation-id"]
                seen = await SseReader(resp).read(stop_after=3)
                first.kill()
        second = GatewayProcess(store, log)
        procs.append(second)
        await second.ready()
        async with httpx.AsyncClient(base_url=second.url, headers=AUTH, timeout=30) as client:
            # closed as lost within the bound (SQLite: at start-up; Postgres: by heartbeat)
            deadline = time.monotonic() + 15
            while True:
                conv = (await client.get(f"/api/v1/conversations/{conversation_id}")).json()
                [run] = conv["runs"]
                if run["status"] != "running" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert (run["status"], run["error"]["code"]) == ("failed", "run_lost")
            # the user's message was stored before the run started
            assert [(m["role"], m["content"]) for m in conv["messages"]] == [
                ("user", "a long answer please")
            ]
            full = await assert_resumable(client, run_id)
            assert full[: len(seen)] == seen
            assert (full[-1].event, full[-1].data["error"]["code"]) == ("run_failed", "run_lost")
            await assert_usable(client, scripted_llm, agent_id, conversation_id)


# --- faults inside one gateway (both stores) -----------------------------------------------------


async def test_client_disconnect_then_resume_from_every_event_id(
    store: Settings, scripted_llm: ScriptedLLM
) -> None:
    async with gateway(store) as client:
        agent_id = await new_agent(client)
        scripted_llm.script(Turn(text="word " * 30, token_delay_s=0.02))
        body = {"agent_id": agent_id, "message": "talk"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            run_id = resp.headers["x-run-id"]
            conversation_id = resp.headers["x-conversation-id"]
            seen = await SseReader(resp).read(stop_after=4)
        # resumed while the run still goes: follows it live to its end
        rest = await replay(client, run_id, seen[-1].id or 0)
        full = await assert_resumable(client, run_id)
        assert seen + rest == full
        assert full[-1].data["status"] == "completed"
        await assert_usable(client, scripted_llm, agent_id, conversation_id)


async def test_llm_drops_its_stream_mid_answer(store: Settings, scripted_llm: ScriptedLLM) -> None:
    async with gateway(store, llm_max_retries=0) as client:
        agent_id = await new_agent(client)
        scripted_llm.script(Turn(text="half an answer " * 10, drop_after_chunks=4))
        body = {"agent_id": agent_id, "message": "answer"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            run_id = resp.headers["x-run-id"]
            conversation_id = resp.headers["x-conversation-id"]
            live = await asyncio.wait_for(read_sse(resp), 30)
        assert_complete(live)
        assert live[-1].event == "run_failed"
        assert await assert_resumable(client, run_id) == live
        await assert_usable(client, scripted_llm, agent_id, conversation_id)


async def test_mcp_server_process_crashes_during_a_tool_call(
    store: Settings, scripted_llm: ScriptedLLM
) -> None:
    async with gateway(store, mcp_stdio_commands=[sys.executable], tool_timeout_s=20.0) as client:
        created = await client.post(
            "/api/v1/mcp-servers",
            json={
                "name": unique("crashy"),
                "transport": "stdio",
                "command": sys.executable,
                "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
                "env": {"PYTHONPATH": str(REPO)},
                "call_timeout_s": 10,
            },
        )
        assert created.status_code == 201, created.text
        server = created.json()
        refreshed = await client.post(f"/api/v1/mcp-servers/{server['id']}/refresh")
        assert refreshed.status_code == 200, refreshed.text
        agent_id = await new_agent(client, mcp_server_ids=[server["id"]])
        call = {"subcommand": "call", "server": server["name"], "tool": "crash", "parameters": {}}
        scripted_llm.script(Turn(tool_calls=[("c1", "mcp", call)]), Turn(text="it crashed"))
        body = {"agent_id": agent_id, "message": "crash it"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            run_id = resp.headers["x-run-id"]
            conversation_id = resp.headers["x-conversation-id"]
            live = await asyncio.wait_for(read_sse(resp), 60)
        assert_complete(live)
        [result] = [e for e in live if e.event == "tool_result"]
        assert result.data["ok"] is False
        assert live[-1].data["status"] == "completed"
        assert await assert_resumable(client, run_id) == live
        await assert_usable(client, scripted_llm, agent_id, conversation_id)
