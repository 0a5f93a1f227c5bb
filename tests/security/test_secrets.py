"""Secrets are encrypted at rest, write-only in the API, redacted from logs.

See docs/contract.md §7.4.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet, InvalidToken
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.cli import main
from app.config import Settings
from app.connectors.models import Connector
from app.databases.models import DatabaseConnector
from app.db.engine import create_engine, create_sessionmaker
from app.main import create_app
from app.mcp.models import McpServer
from app.ops.logging import JsonFormatter
from app.security import crypto
from app.security.redact import redact, redact_text, register_secret
from app.security.rotate import rotate_all
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.connectors.server_app import LocalServer
from tests.fixtures.crud import assert_error, create
from tests.fixtures.database import migrated_postgres

TOKEN = "tok-SECRET-7f3a9c"
DB_PASSWORD = "pw-SECRET-4b1e"
DB_URL = f"postgresql://reader:{DB_PASSWORD}@db.internal:5432/shop"
ENV_VALUE = "env-SECRET-90d2"
HEADER_VALUE = "hdr-SECRET-c55e"


@pytest.fixture
def keyring() -> Iterator[None]:
    """Tests that swap the process-wide keyring put the suite's keyring back afterwards."""
    saved = crypto._keyring
    yield
    crypto._keyring = saved


async def raw_value(session: AsyncSession, table: str, column: str, row_id: str) -> str:
    """The stored bytes, read with plain SQL (no ORM type decorator in the way)."""
    stmt = text(f"SELECT {column} FROM {table} WHERE id = :id")
    value = (await session.execute(stmt, {"id": uuid.UUID(row_id)})).scalar_one()
    assert isinstance(value, str)
    return value


def decrypt(token: str, key: str = SECRET_KEY) -> str:
    return Fernet(key.encode()).decrypt(token.encode()).decode()


def assert_encrypted(raw: str, *secrets: str) -> str:
    assert raw.startswith("gAAAAA"), "a Fernet token"
    for secret in secrets:
        assert secret not in raw
    return decrypt(raw)


def assert_hidden(responses: list[httpx.Response], *secrets: str) -> None:
    for resp in responses:
        assert resp.status_code < 300, resp.text
        for secret in secrets:
            assert secret not in resp.text, (resp.request.method, resp.request.url)


# --- at rest and in responses ---


async def test_connector_credentials(client: httpx.AsyncClient, session: AsyncSession) -> None:
    body = {
        "name": "github",
        "base_url": "https://api.github.test",
        "auth_type": "bearer",
        "credentials": {"token": TOKEN},
    }
    created = await client.post("/api/v1/connectors", json=body)
    cid = created.json()["id"]
    item = f"/api/v1/connectors/{cid}"
    responses = [created, await client.get(item), await client.get("/api/v1/connectors")]
    rotated = "tok-SECRET-rotated-1"
    responses.append(await client.patch(item, json={"credentials": {"token": rotated}}))
    responses.append(await client.patch(item, json={"description": "still secret"}))
    assert_hidden(responses, TOKEN, rotated)
    assert all(r.json().get("has_credentials", True) for r in responses)
    assert "credentials" not in created.json()

    stored = assert_encrypted(await raw_value(session, "connectors", "credentials", cid), rotated)
    assert json.loads(stored) == {"token": rotated}


async def test_database_url(client: httpx.AsyncClient, session: AsyncSession) -> None:
    created = await client.post("/api/v1/databases", json={"name": "shop", "url": DB_URL})
    did = created.json()["id"]
    item = f"/api/v1/databases/{did}"
    new_url = DB_URL.replace(DB_PASSWORD, "pw-SECRET-second")
    responses = [
        created,
        await client.get(item),
        await client.get("/api/v1/databases"),
        await client.patch(item, json={"url": new_url}),
    ]
    assert_hidden(responses, DB_PASSWORD, "pw-SECRET-second")
    assert responses[1].json()["url"] == "postgresql://reader:***@db.internal:5432/shop"

    raw = await raw_value(session, "database_connectors", "url", did)
    assert assert_encrypted(raw, "pw-SECRET-second", "db.internal") == new_url


async def test_database_url_in_query_string_is_masked(client: httpx.AsyncClient) -> None:
    url = "postgresql://db.internal/shop?user=reader&password=pw-SECRET-query"
    created = await create(client, "/api/v1/databases", {"name": "q", "url": url})
    assert "pw-SECRET-query" not in json.dumps(created)
    assert created["url"] == "postgresql://db.internal/shop?***"


async def test_mcp_env_and_headers(client: httpx.AsyncClient, session: AsyncSession) -> None:
    stdio = await client.post(
        "/api/v1/mcp-servers",
        json={
            "name": "local",
            "transport": "stdio",
            "command": "mcp-server-time",
            "env": {"K": ENV_VALUE},
        },
    )
    remote = await client.post(
        "/api/v1/mcp-servers",
        json={
            "name": "remote",
            "transport": "streamable_http",
            "url": "https://mcp.test/mcp",
            "headers": {"Authorization": f"Bearer {HEADER_VALUE}"},
        },
    )
    sid, rid = stdio.json()["id"], remote.json()["id"]
    responses = [
        stdio,
        remote,
        await client.get(f"/api/v1/mcp-servers/{sid}"),
        await client.get("/api/v1/mcp-servers"),
        await client.patch(f"/api/v1/mcp-servers/{rid}", json={"description": "x"}),
        await client.patch(f"/api/v1/mcp-servers/{sid}", json={"env": {"K2": "env-SECRET-2nd"}}),
    ]
    assert_hidden(responses, ENV_VALUE, HEADER_VALUE, "env-SECRET-2nd")
    assert responses[4].json()["headers"] == {"Authorization": "***"}
    assert responses[5].json()["env"] == {"K2": "***"}

    env = assert_encrypted(await raw_value(session, "mcp_servers", "env", sid), "env-SECRET-2nd")
    assert json.loads(env) == {"K2": "env-SECRET-2nd"}
    headers = assert_encrypted(
        await raw_value(session, "mcp_servers", "headers", rid), HEADER_VALUE
    )
    assert json.loads(headers) == {"Authorization": f"Bearer {HEADER_VALUE}"}


async def test_validation_errors_do_not_echo_secrets(client: httpx.AsyncClient) -> None:
    bad_credentials = {
        "name": "c",
        "base_url": "https://api.test",
        "auth_type": "bearer",
        "credentials": {"token": TOKEN, "password": "pw-SECRET-extra"},
    }
    for resp in (
        await client.post("/api/v1/connectors", json=bad_credentials),
        await client.post(
            "/api/v1/databases", json={"name": "d", "url": "oracle://u:pw-SECRET-x@h/d"}
        ),
        await client.post("/api/v1/databases", json={"name": "d", "url": 5, "x": DB_URL}),
    ):
        body = assert_error(resp, 422, "Invalid")
        for secret in (TOKEN, "pw-SECRET-extra", "pw-SECRET-x", DB_PASSWORD):
            assert secret not in json.dumps(body)


# --- what the admin test routes (the model's executors) answer ---


@pytest.fixture(scope="module")
def echo_server() -> Iterator[LocalServer]:
    """Echoes every request back, headers included: an upstream that reflects our secrets."""
    server = LocalServer().start()
    yield server
    server.stop()


@pytest.fixture
async def loopback_app(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[FastAPI]:
    """The suite's app, with 127.0.0.0/8 allowed so executors can reach local servers."""
    local = settings.model_copy(update={"egress_allow_cidrs": ["127.0.0.0/8"]})
    app = create_app(local, sessionmaker=sessionmaker)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def loopback(loopback_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=loopback_app),
        base_url="http://quiver.test",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    ) as client:
        yield client


async def test_connector_results_redact_reflected_credentials(
    loopback: httpx.AsyncClient, echo_server: LocalServer
) -> None:
    secret = f"tok-SECRET-echo-{uuid.uuid4().hex[:8]}"
    connector = await create(
        loopback,
        "/api/v1/connectors",
        {
            "name": "echo",
            "base_url": echo_server.url,
            "auth_type": "bearer",
            "credentials": {"token": secret},
            "actions": [{"name": "whoami", "path": "/whoami"}],
        },
    )
    resp = await loopback.post(f"/api/v1/connectors/{connector['id']}/actions/whoami/test", json={})
    assert resp.status_code == 200, resp.text
    assert echo_server.last["headers"]["authorization"] == f"Bearer {secret}", "it was sent"
    assert resp.json()["ok"] is True
    assert secret not in resp.text
    assert "/whoami" in resp.json()["output"]


async def test_database_errors_do_not_show_the_url(loopback: httpx.AsyncClient) -> None:
    url = "postgresql://reader:pw-SECRET-unreachable@127.0.0.1:1/shop"
    database = await create(loopback, "/api/v1/databases", {"name": "gone", "url": url})
    responses = [
        await loopback.post(f"/api/v1/databases/{database['id']}/query", json={"sql": "SELECT 1"}),
        await loopback.post(f"/api/v1/databases/{database['id']}/introspect"),
    ]
    assert responses[0].status_code == 200, responses[0].text
    assert responses[0].json()["ok"] is False
    assert responses[1].status_code == 502, "an unreachable upstream is not a crash"
    for resp in responses:
        assert "pw-SECRET-unreachable" not in resp.text


async def test_mcp_errors_do_not_show_headers(loopback: httpx.AsyncClient) -> None:
    server = await create(
        loopback,
        "/api/v1/mcp-servers",
        {
            "name": "gone",
            "transport": "streamable_http",
            "url": "http://127.0.0.1:1/mcp",
            "headers": {"Authorization": "Bearer hdr-SECRET-unreachable"},
            "connect_timeout_s": 5,
        },
    )
    resp = await loopback.post(
        f"/api/v1/mcp-servers/{server['id']}/call", json={"tool": "x", "arguments": {}}
    )
    assert resp.status_code < 500, resp.text
    assert "hdr-SECRET-unreachable" not in resp.text


# --- redaction ---


def test_redact_text_masks_registered_secrets() -> None:
    register_secret("registered-SECRET-11")
    register_secret("abc")  # too short to register: would mask ordinary words
    line = "calling with registered-SECRET-11 and abc"
    assert redact_text(line) == "calling with *** and abc"
    assert redact({"a": ["x registered-SECRET-11"], "n": 3}) == {"a": ["x ***"], "n": 3}


def test_redact_text_masks_url_passwords_and_bearer_tokens() -> None:
    assert redact_text("dsn=postgresql://bob:hunter2@db:5432/x ok") == (
        "dsn=postgresql://bob:***@db:5432/x ok"
    )
    assert redact_text("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc") == (
        "Authorization: Bearer ***"
    )
    assert redact_text("authorization: basic dXNlcjpwYXNzd29yZA==") == "authorization: basic ***"
    assert redact_text("a plain sentence about bearer bonds") == (
        "a plain sentence about bearer bonds"
    )


async def test_decrypted_secrets_are_registered_for_redaction(
    client: httpx.AsyncClient,
) -> None:
    secret = f"tok-SECRET-{uuid.uuid4().hex}"
    body = {"name": "c", "base_url": "https://a.test", "auth_type": "api_key"}
    body["credentials"] = {"api_key": secret}
    created = await create(client, "/api/v1/connectors", body)
    await client.get(f"/api/v1/connectors/{created['id']}")
    assert redact_text(f"upstream said: bad key {secret}") == "upstream said: bad key ***"


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    """Capture what the production formatter writes, at INFO, from every logger."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


async def test_log_lines_never_contain_secrets(
    client: httpx.AsyncClient, json_log: io.StringIO
) -> None:
    quoted = 'pa"ss\\SECRET-q'
    accented = "pässwörd-SECRET-ü"
    body = {
        "name": "c",
        "base_url": "https://a.test",
        "auth_type": "basic",
        "credentials": {"username": quoted, "password": accented},
    }
    created = await create(client, "/api/v1/connectors", body)
    await client.get(f"/api/v1/connectors/{created['id']}")
    await create(client, "/api/v1/databases", {"name": "d", "url": DB_URL})

    log = logging.getLogger("quiver.test")
    log.info("connecting with %s and %s", quoted, DB_URL)
    log.info("upstream", extra={"auth": quoted, "nested": {"pw": [accented]}, "url": DB_URL})
    log.warning("header was Authorization: Bearer %s", "opaque-token-123456")
    try:
        raise RuntimeError(f"login failed for {accented}")
    except RuntimeError:
        log.exception("call failed")

    lines = json_log.getvalue().splitlines()
    assert len(lines) >= 7, "access log lines and ours"
    records = [json.loads(line) for line in lines]
    assert any(r.get("logger") == "quiver.access" for r in records)
    assert any("request_id" in r for r in records)
    for line, record in zip(lines, records, strict=True):
        decoded = json.dumps(record, ensure_ascii=False)
        for secret in (quoted, accented, DB_PASSWORD, "opaque-token-123456"):
            assert secret not in line
            assert secret not in decoded
    ours = [r for r in records if r["logger"] == "quiver.test"]
    assert ours[1]["auth"] == "***"
    assert ours[1]["nested"] == {"pw": ["***"]}
    assert "RuntimeError" in ours[3]["exc"]


# --- key rotation ---


async def _raw_secrets(engine: AsyncEngine) -> dict[str, str | None]:
    queries = {
        "credentials": "SELECT credentials FROM connectors WHERE name = 'api'",
        "none": "SELECT credentials FROM connectors WHERE name = 'open'",
        "url": "SELECT url FROM database_connectors",
        "env": "SELECT env FROM mcp_servers",
        "headers": "SELECT headers FROM mcp_servers",
    }
    async with engine.connect() as conn:
        return {k: (await conn.execute(text(q))).scalar_one() for k, q in queries.items()}


def _assert_only(raw: dict[str, str | None], key: str, *, not_with: str) -> dict[str, Any]:
    plain: dict[str, Any] = {}
    for name, token in raw.items():
        if token is None:
            plain[name] = None
            continue
        with pytest.raises(InvalidToken):
            decrypt(token, not_with)
        plain[name] = decrypt(token, key)
    return plain


async def test_rotate_secrets_reencrypts_under_the_new_key(
    keyring: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, newer = (Fernet.generate_key().decode() for _ in range(3))
    async with migrated_postgres({"secret_keys": [old]}) as settings:
        crypto.configure_keys([old])
        engine = create_engine(settings)
        try:
            async with create_sessionmaker(engine)() as session:
                session.add_all(
                    [
                        Connector(name="api", base_url="https://a.test", credentials={"t": TOKEN}),
                        Connector(name="open", base_url="https://b.test"),
                        DatabaseConnector(name="db", url=DB_URL, dialect="postgresql"),
                        McpServer(
                            name="m",
                            transport="stdio",
                            command="srv",
                            env={"K": ENV_VALUE},
                            headers={"H": HEADER_VALUE},
                        ),
                    ]
                )
                await session.commit()
            before = _assert_only(await _raw_secrets(engine), old, not_with=new)

            rotating = Settings(database_url=settings.database_url, secret_keys=[new, old])  # type: ignore[list-item]
            counts = await rotate_all(rotating)
            assert counts == {"connectors": 2, "database_connectors": 1, "mcp_servers": 1}
            after = _assert_only(await _raw_secrets(engine), new, not_with=old)
            assert after == before
            assert after["none"] is None

            crypto.configure_keys([new])
            async with create_sessionmaker(engine)() as session:
                row = await session.get(DatabaseConnector, (await _db_id(engine)))
                assert row is not None
                assert row.url == DB_URL

            monkeypatch.setenv("QUIVER_DATABASE_URL", settings.database_url)
            monkeypatch.setenv("QUIVER_SECRET_KEYS", f"{newer},{new}")
            assert await asyncio.to_thread(main, ["rotate-secrets"]) == 0
            assert "connectors=2" in capsys.readouterr().out
            assert _assert_only(await _raw_secrets(engine), newer, not_with=new) == before
        finally:
            await engine.dispose()


async def _db_id(engine: AsyncEngine) -> uuid.UUID:
    async with engine.connect() as conn:
        value = (await conn.execute(text("SELECT id FROM database_connectors"))).scalar_one()
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


def test_short_non_credential_values_are_not_treated_as_secrets() -> None:
    from app.security.redact import redact_text, register_secrets

    register_secrets({"DEBUG": "true", "MODE": "fast", "API_TOKEN": "tk-9z"})
    assert redact_text("debug is true, mode fast") == "debug is true, mode fast"
    assert redact_text("token tk-9z") == "token ***"
