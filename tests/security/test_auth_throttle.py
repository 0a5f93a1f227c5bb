"""Failed key attempts are throttled per client address (API bearer, MCP endpoint, console
sign-in) and a valid key is never locked out, not even from the throttled address."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.crud import assert_error

LIMIT = 5
WRONG = {"Authorization": "Bearer qv_wrong_key_0123456789abcdef"}
GOOD = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
async def throttled_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    app = create_app(
        settings.model_copy(update={"auth_fail_limit": LIMIT, "auth_fail_window_s": 60.0}),
        sessionmaker=sessionmaker,
    )
    async with app.router.lifespan_context(app):
        yield app


def client_from(app: FastAPI, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://quiver.test")


async def test_failed_bearer_keys_are_throttled_per_address_and_valid_keys_pass(
    throttled_app: FastAPI,
) -> None:
    async with (
        client_from(throttled_app, "203.0.113.7") as attacker,
        client_from(throttled_app, "198.51.100.2") as other,
    ):
        for _ in range(LIMIT):
            resp = await attacker.get("/api/v1/agents", headers=WRONG)
            assert_error(resp, 401, "Unauthorized")
        refused = await attacker.get("/api/v1/agents", headers=WRONG)
        assert_error(refused, 429, "RateLimited", mentions=["failed authentication"])
        assert 1 <= int(refused.headers["retry-after"]) <= 60
        mcp = await attacker.post(
            "/mcp/agents/anything",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={**WRONG, "Accept": "application/json, text/event-stream"},
        )
        assert_error(mcp, 429, "RateLimited")
        # the valid key still passes from the throttled address, on the API and over MCP
        assert (await attacker.get("/api/v1/agents", headers=GOOD)).status_code == 200
        # another address is not affected
        assert_error(await other.get("/api/v1/agents", headers=WRONG), 401, "Unauthorized")


TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


async def _sign_in(browser: httpx.AsyncClient, key: str) -> httpx.Response:
    form = await browser.get("/ui/login")
    token = TOKEN.search(form.text)
    assert token is not None
    return await browser.post("/ui/login", data={"api_key": key, "csrf_token": token.group(1)})


async def test_console_sign_in_is_throttled_without_locking_out_a_valid_key(
    throttled_app: FastAPI,
) -> None:
    async with client_from(throttled_app, "203.0.113.9") as browser:
        for _ in range(LIMIT):
            assert (await _sign_in(browser, "qv_not_a_key")).status_code == 401
        refused = await _sign_in(browser, "qv_not_a_key")
        assert refused.status_code == 429
        assert "too many failed authentication attempts" in refused.text
        assert "retry-after" in refused.headers
        assert (await _sign_in(browser, ADMIN_TOKEN)).status_code == 303


async def test_no_limit_when_set_to_zero(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    app = create_app(settings.model_copy(update={"auth_fail_limit": 0}), sessionmaker=sessionmaker)
    async with app.router.lifespan_context(app), client_from(app, "203.0.113.10") as client:
        for _ in range(LIMIT * 3):
            assert (await client.get("/api/v1/agents", headers=WRONG)).status_code == 401
