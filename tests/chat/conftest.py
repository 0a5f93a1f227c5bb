"""Chat tests: the Quiver app on a real uvicorn server, a scripted LLM on another."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import serve_app
from tests.fixtures.scripted_llm import ScriptedLLM

LIVE_DEFAULTS: dict[str, Any] = {
    "llm_max_retries": 2,
    "tool_timeout_s": 5.0,
    "sse_ping_s": 15.0,
    "worker_heartbeat_s": 1.0,
}


@pytest.fixture(scope="module")
async def live_url(
    request: pytest.FixtureRequest,
    committing_settings: Settings,
    scripted_llm_session: ScriptedLLM,
) -> AsyncIterator[str]:
    """A live Quiver for the module (committing to the session's test database).

    A module changes its settings with a `LIVE_SETTINGS` dict (e.g. egress to loopback for
    its own upstream), applied over `LIVE_DEFAULTS`.
    """
    async with serve_app(create_app(live_settings(request, committing_settings))) as base_url:
        yield base_url


def live_settings(request: pytest.FixtureRequest, committing_settings: Settings) -> Settings:
    """The committing settings with the scripted model, `LIVE_DEFAULTS` and the module's
    `LIVE_SETTINGS`."""
    llm: ScriptedLLM = request.getfixturevalue("scripted_llm_session")
    return committing_settings.model_copy(
        update={
            "llm_base_url": llm.base_url,
            **LIVE_DEFAULTS,
            **getattr(request.module, "LIVE_SETTINGS", {}),
        }
    )


@pytest.fixture
async def live(live_url: str, scripted_llm: ScriptedLLM) -> AsyncIterator[httpx.AsyncClient]:
    """An admin client for the live Quiver; the scripted LLM starts each test empty."""
    async with httpx.AsyncClient(
        base_url=live_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as client:
        yield client


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


CreateAgent = Callable[..., Awaitable[dict[str, Any]]]


@pytest.fixture
def create_agent(live: httpx.AsyncClient) -> CreateAgent:
    async def create(**fields: Any) -> dict[str, Any]:
        body = {"name": unique("agent"), "instructions": "You are a test agent.", **fields}
        response = await live.post("/api/v1/agents", json=body)
        assert response.status_code == 201, response.text
        data: dict[str, Any] = response.json()
        return data

    return create
