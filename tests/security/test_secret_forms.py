"""Secrets with reserved characters: database URLs, encoded query credentials, MCP env echoes."""

from __future__ import annotations

import base64
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote, quote_plus

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from app.ops.logging import JsonFormatter
from app.security.redact import redact_text, register_basic, register_secret, wire_forms
from app.security.secrets_view import mask_url
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer
from tests.fixtures.crud import assert_error, create
from tests.mcp.servers import PYTHON, REPO


def encodings(secret: str) -> set[str]:
    """What a leak looks like: the secret raw, percent-/form-encoded or JSON-escaped."""
    return {
        secret,
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
        quote(secret),
        json.dumps(secret)[1:-1],
    }


def assert_absent(text: str, secret: str) -> None:
    for form in encodings(secret):
        assert form not in text, (form, text[:2000])


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """What the production formatter writes, at INFO, from every logger (httpx included)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # httpx's request line is the form under test; a library imported earlier in the run
    # (LiteLLM) quiets that logger, so it is set to follow the root here.
    httpx_logger = logging.getLogger("httpx")
    httpx_level = httpx_logger.level
    httpx_logger.setLevel(logging.NOTSET)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)
    httpx_logger.setLevel(httpx_level)


@pytest.fixture(scope="module")
def echo_server() -> Iterator[LocalServer]:
    server = LocalServer().start()
    yield server
    server.stop()


@pytest.fixture
async def loopback(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[httpx.AsyncClient]:
    """The suite's app with 127.0.0.0/8 reachable and our stdio MCP server allowed."""
    local = settings.model_copy(
        update={"egress_allow_cidrs": ["127.0.0.0/8"], "mcp_stdio_commands": [PYTHON]}
    )
    app: FastAPI = create_app(local, sessionmaker=sessionmaker)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=60,
        ) as client,
    ):
        yield client


# --- database URLs ---


@pytest.mark.parametrize(
    "password", ["SECRET/DB+PW=x", "SECRET#DB#PW-1", "Hunter2pw?x=1", "a/b?c#d:e=SECRET"]
)
async def test_database_password_with_reserved_characters_never_returns(
    loopback: httpx.AsyncClient, json_log: io.StringIO, password: str
) -> None:
    url = f"postgresql://postgres:{password}@127.0.0.1:5432/postgres"
    created = await loopback.post("/api/v1/databases", json={"name": "reserved", "url": url})
    assert created.status_code == 201, created.text
    item = f"/api/v1/databases/{created.json()['id']}"
    responses = [
        created,
        await loopback.get(item),
        await loopback.get("/api/v1/databases"),
        await loopback.post(f"{item}/introspect"),  # the trust-auth Postgres accepts any password
        await loopback.post(f"{item}/query", json={"sql": "SELECT 1 AS one"}),
    ]
    for resp in responses:
        assert resp.status_code == 200 or resp is created, resp.text
        assert_absent(resp.text, password)
    assert responses[1].json()["url"] == "postgresql://postgres:***@127.0.0.1:5432/postgres"
    assert responses[4].json()["ok"] is True, "the password reached the driver intact"
    assert_absent(json_log.getvalue(), password)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:pw-SECRET-port@127.0.0.1:notaport/db",
        "postgresql://postgres:pw-SECRET-v6@[::1:5432/db",
    ],
)
async def test_unparseable_database_url_is_a_422_that_does_not_echo_it(
    client: httpx.AsyncClient, url: str
) -> None:
    body = assert_error(
        await client.post("/api/v1/databases", json={"name": "bad", "url": url}), 422, "Invalid"
    )
    assert "url" in body["detail"]
    for part in ("SECRET", "notaport", "::1"):
        assert part not in body["detail"]
    created = await create(
        client, "/api/v1/databases", {"name": "good", "url": "postgresql://h/db"}
    )
    patched = await client.patch(f"/api/v1/databases/{created['id']}", json={"url": url})
    assert "SECRET" not in assert_error(patched, 422, "Invalid")["detail"]


def test_mask_url_parses_like_the_engines() -> None:
    assert mask_url("postgresql://u:a/b#c?d@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("mysql://u:p%40ss@h/db?ssl_key=k") == "mysql://u:***@h/db?***"
    assert mask_url("sqlite:///data/x.db") == "sqlite:///data/x.db"
    assert mask_url("postgresql://u:pw@h:port/db") == "***"


# --- encoded forms ---


def test_every_wire_form_of_a_registered_secret_is_redacted() -> None:
    secret = 'SECRET/APIQ+KEY=c3d4 "x"'
    register_secret(secret)
    lower_hex = re.sub(r"%[0-9A-F]{2}", lambda m: m[0].lower(), quote(secret, safe=""))
    for form in encodings(secret) | {lower_hex}:
        assert redact_text(f"GET /p?key={form}&n=1") == "GET /p?key=***&n=1", form
    assert wire_forms(secret) >= encodings(secret)


def test_basic_credentials_are_redacted_as_their_base64() -> None:
    register_basic("basic-user-x", "pw-SECRET/basic")
    token = base64.b64encode(b"basic-user-x:pw-SECRET/basic").decode()
    assert redact_text(f'{{"authorization": "{token}"}}') == '{"authorization": "***"}'


async def test_api_key_query_credential_never_returns_encoded(
    loopback: httpx.AsyncClient, echo_server: LocalServer, json_log: io.StringIO
) -> None:
    secret = "SECRET/APIQ+KEY=c3d4"
    connector = await create(
        loopback,
        "/api/v1/connectors",
        {
            "name": "apiq",
            "base_url": echo_server.url,
            "auth_type": "api_key",
            "auth_config": {"query_param": "key"},
            "credentials": {"api_key": secret},
            "actions": [{"name": "whoami", "path": "/whoami"}],
        },
    )
    resp = await loopback.post(f"/api/v1/connectors/{connector['id']}/actions/whoami/test", json={})
    assert resp.status_code == 200, resp.text
    assert ["key", secret] in echo_server.last["query"], "it was sent"
    assert resp.json()["ok"] is True
    assert_absent(resp.text, secret)
    log = json_log.getvalue()
    assert "HTTP Request" in log, "httpx logged the request line"
    assert_absent(log, secret)


# --- MCP admin call ---


async def test_mcp_admin_call_redacts_the_servers_env_secret(loopback: httpx.AsyncClient) -> None:
    secret = "env-SECRET/mcp+value"
    server = await create(
        loopback,
        "/api/v1/mcp-servers",
        {
            "name": "envecho",
            "transport": "stdio",
            "command": PYTHON,
            "args": ["-m", "tests.mcp.server_app", "--transport", "stdio"],
            "env": {"PYTHONPATH": str(REPO), "APP_TOKEN": secret},
        },
    )
    resp = await loopback.post(
        f"/api/v1/mcp-servers/{server['id']}/call", json={"tool": "env", "arguments": {}}
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["ok"] is True, resp.text
    assert "APP_TOKEN" in resp.json()["output"], "the server did print its env"
    assert_absent(resp.text, secret)
