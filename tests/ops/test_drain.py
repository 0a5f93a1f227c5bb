"""A draining process (SIGTERM, `RunManager.drain`) is not ready and starts no run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from app.runtime import Runtime
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.scripted_llm import ScriptedLLM


@pytest.fixture
async def chat_client(
    settings: Settings,
    sessionmaker: async_sessionmaker[AsyncSession],
    scripted_llm: ScriptedLLM,
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    app = create_app(
        settings.model_copy(update={"llm_base_url": scripted_llm.base_url}),
        sessionmaker=sessionmaker,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as client:
            yield client, app.state.runtime


async def test_draining_turns_readiness_false_and_refuses_new_runs(
    chat_client: tuple[httpx.AsyncClient, Runtime],
) -> None:
    client, runtime = chat_client
    agent = await client.post("/api/v1/agents", json={"name": "drained"})
    assert agent.status_code == 201, agent.text
    assert (await client.get("/readyz")).status_code == 200
    runtime.runs.drain()
    ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json() == {"error": "Unavailable", "detail": "draining: shutting down"}
    chat = await client.post(
        "/api/v1/chat", json={"agent_id": agent.json()["id"], "message": "hello"}
    )
    assert chat.status_code == 503, chat.text
    assert "shutting down" in chat.json()["detail"]
    assert (await client.get("/api/v1/agents")).status_code == 200, "the rest still answers"
