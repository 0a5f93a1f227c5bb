"""Two gateway processes' worth of state (two apps, two hubs) on one Postgres: live fan-out
and cancel requests must cross between them through LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.chat.conftest import unique
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import SseReader, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(scope="module")
async def two_workers(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> AsyncIterator[tuple[str, str]]:
    worker_settings = committing_settings.model_copy(
        update={"llm_base_url": scripted_llm_session.base_url}
    )
    async with (
        serve_app(create_app(worker_settings)) as a,
        serve_app(create_app(worker_settings)) as b,
    ):
        yield a, b


async def test_a_run_on_one_worker_streams_live_on_another(
    two_workers: tuple[str, str], scripted_llm: ScriptedLLM
) -> None:
    url_a, url_b = two_workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        agent = (await a.post("/api/v1/agents", json={"name": unique("w")})).json()
        scripted_llm.script(Turn(text="tick " * 40, token_delay_s=0.05))
        async with a.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as started:
            run_id = started.headers["x-run-id"]
            first = await SseReader(started).read(stop_after=1)
            assert first[0].event == "run_started"
            async with b.stream("GET", f"/api/v1/runs/{run_id}/events") as follow:
                reader = SseReader(follow)
                seen = await reader.read(stop_after=2)
                gaps = []
                last = time.perf_counter()
                while seen[-1].event != "run_finished":
                    seen += await reader.read(stop_after=1)
                    now = time.perf_counter()
                    gaps.append(now - last)
                    last = now
    assert [e.id for e in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].data["status"] == "completed"
    deltas = [e for e in seen if e.event == "model_delta"]
    assert len(deltas) >= 5
    # pushed by NOTIFY, not found by the 1-second fallback poll: no gap near the poll interval
    assert max(gaps) < 0.7


async def test_cancel_sent_to_another_worker_stops_the_run(
    two_workers: tuple[str, str], scripted_llm: ScriptedLLM
) -> None:
    url_a, url_b = two_workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        agent = (await a.post("/api/v1/agents", json={"name": unique("w")})).json()
        scripted_llm.script(Turn(text="slow " * 400, token_delay_s=0.02))
        async with a.stream(
            "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "go"}
        ) as started:
            run_id = started.headers["x-run-id"]
            reader = SseReader(started)
            await reader.read(stop_after=1)
            cancel = await b.post(f"/api/v1/runs/{run_id}/cancel")
            assert cancel.status_code == 200
            events = await asyncio.wait_for(reader.read(), 5)
    assert events[-1].event == "run_finished"
    assert events[-1].data["status"] == "cancelled"
