"""`rate_limit_per_minute` on an API key holds across workers: two apps, one Postgres."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.chat.conftest import unique
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
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


async def _limited_key(admin: httpx.AsyncClient, per_minute: int) -> tuple[str, str]:
    agent = (await admin.post("/api/v1/agents", json={"name": unique("rl")})).json()
    created = await admin.post(
        "/api/v1/api-keys",
        json={"name": unique("limited"), "scopes": ["chat"], "rate_limit_per_minute": per_minute},
    )
    assert created.status_code == 201, created.text
    assert created.json()["rate_limit_per_minute"] == per_minute
    return agent["id"], created.json()["key"]


async def test_the_limit_counts_runs_started_on_every_worker(
    two_workers: tuple[str, str], scripted_llm: ScriptedLLM
) -> None:
    url_a, url_b = two_workers
    async with httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as admin:
        agent_id, key = await _limited_key(admin, 2)
    headers = {"Authorization": f"Bearer {key}"}
    body = {"agent_id": agent_id, "message": "hi"}
    scripted_llm.script(Turn(text="one"), Turn(text="two"))
    async with (
        httpx.AsyncClient(base_url=url_a, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=headers, timeout=30) as b,
    ):
        assert (await a.post("/api/v1/chat", json=body)).status_code == 200
        assert (await b.post("/api/v1/chat", json=body)).status_code == 200
        for client in (a, b):
            over = await client.post("/api/v1/chat", json=body)
            assert over.status_code == 429, over.text
            assert over.json()["error"] == "RateLimited"
            assert 1 <= int(over.headers["retry-after"]) <= 60
        # refused starts create nothing
        runs = (await a.get("/api/v1/runs")).json()
        assert runs["total"] == 2


async def test_concurrent_starts_on_two_workers_never_exceed_the_limit(
    two_workers: tuple[str, str], scripted_llm: ScriptedLLM
) -> None:
    url_a, url_b = two_workers
    async with httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as admin:
        agent_id, key = await _limited_key(admin, 3)
    headers = {"Authorization": f"Bearer {key}"}
    body = {"agent_id": agent_id, "message": "hi"}
    scripted_llm.script(*[Turn(text=f"run {i}") for i in range(3)])
    async with (
        httpx.AsyncClient(base_url=url_a, headers=headers, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=headers, timeout=30) as b,
    ):
        answers = await asyncio.gather(
            *[(a if i % 2 else b).post("/api/v1/chat", json=body) for i in range(8)]
        )
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [200] * 3 + [429] * 5


async def test_keys_without_a_limit_are_not_limited_and_bad_limits_are_refused(
    two_workers: tuple[str, str],
) -> None:
    async with httpx.AsyncClient(base_url=two_workers[0], headers=AUTH, timeout=30) as admin:
        for bad in (0, -1, "many"):
            resp = await admin.post(
                "/api/v1/api-keys", json={"name": unique("k"), "rate_limit_per_minute": bad}
            )
            assert resp.status_code == 422, resp.text
            assert "rate_limit_per_minute" in resp.json()["detail"]
        created = (await admin.post("/api/v1/api-keys", json={"name": unique("k")})).json()
        assert created["rate_limit_per_minute"] is None
        patched = await admin.patch(
            f"/api/v1/api-keys/{created['id']}", json={"rate_limit_per_minute": 5}
        )
        assert patched.json()["rate_limit_per_minute"] == 5
        cleared = await admin.patch(
            f"/api/v1/api-keys/{created['id']}", json={"rate_limit_per_minute": None}
        )
        assert cleared.json()["rate_limit_per_minute"] is None
