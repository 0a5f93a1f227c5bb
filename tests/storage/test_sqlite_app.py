"""The embedded default (no QUIVER_DATABASE_URL): SQLite under the data dir, end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from pydantic import SecretStr

from app.config import Settings
from app.db.migrate import upgrade
from app.main import create_app
from app.security import crypto
from tests.fixtures.served import await_ready

KEY_LINE = re.compile(r"^\s+(qv_[A-Za-z0-9_-]{20,})$", re.MULTILINE)


@pytest.fixture
def keyring() -> Iterator[None]:
    saved = crypto._keyring
    yield
    crypto._keyring = saved


@pytest.fixture
async def embedded(tmp_path: Path, keyring: None) -> Settings:
    settings = Settings(
        database_url="", data_dir=tmp_path / "data", admin_token=None, secret_keys=[]
    )
    await asyncio.to_thread(upgrade, settings)
    return settings


@contextlib.asynccontextmanager
async def running(settings: Settings, key: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://quiver.test", headers=headers
        ) as client,
    ):
        client.app = app  # type: ignore[attr-defined]
        yield client


def printed_keys(out: str) -> list[str]:
    return KEY_LINE.findall(out)


async def test_embedded_default_end_to_end(
    embedded: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert embedded.async_database_url.startswith("sqlite+aiosqlite:")
    assert (embedded.data_dir / "quiver.db").is_file()

    async with running(embedded) as anon:
        [key] = printed_keys(capsys.readouterr().out)
        assert (await anon.get("/api/v1/skills")).status_code == 401
        await await_ready(anon)
    secret_key = embedded.data_dir / "secret.key"
    assert stat.S_IMODE(secret_key.stat().st_mode) == 0o600

    async with running(embedded, key) as client:
        skill = await client.post("/api/v1/skills", json={"name": "triage", "content": "steps"})
        assert skill.status_code == 201, skill.text
        sid = skill.json()["id"]
        connector = await client.post(
            "/api/v1/connectors",
            json={
                "name": "api",
                "base_url": "https://api.test",
                "auth_type": "bearer",
                "credentials": {"token": "tok-embedded-secret"},
            },
        )
        assert connector.status_code == 201, connector.text
        cid = connector.json()["id"]
        body = {"name": "helper", "skill_ids": [sid], "connector_ids": [cid]}
        agent = await client.post("/api/v1/agents", json=body)
        assert agent.status_code == 201, agent.text
        aid = agent.json()["id"]

        patched = await client.patch(f"/api/v1/agents/{aid}", json={"instructions": "Be brief."})
        assert patched.json()["instructions"] == "Be brief."
        assert patched.json()["skill_ids"] == [sid]
        assert (await client.get("/api/v1/agents")).json()["total"] == 1
        dup = await client.post("/api/v1/skills", json={"name": "triage", "content": "x"})
        assert (dup.status_code, dup.json()["error"]) == (409, "Conflict")

        assert (await client.delete(f"/api/v1/skills/{sid}")).status_code == 204
        fetched = (await client.get(f"/api/v1/agents/{aid}")).json()
        assert fetched["skill_ids"] == [], "SQLite enforces the link's ON DELETE CASCADE"
        assert fetched["connector_ids"] == [cid]
        assert (await client.get(f"/api/v1/connectors/{cid}")).json()["has_credentials"] is True
        assert (await client.delete(f"/api/v1/agents/{aid}")).status_code == 204
        assert (await client.get(f"/api/v1/agents/{aid}")).status_code == 404

    raw = _query(embedded, "SELECT credentials FROM connectors")
    assert raw[0][0].startswith("gAAAAA")
    assert "tok-embedded-secret" not in raw[0][0]


async def test_first_start_prints_an_admin_key_once(
    embedded: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running(embedded):
        pass
    out = capsys.readouterr().out
    [key] = printed_keys(out)
    assert "shown once" in out

    async with running(embedded, key) as client:
        assert (await client.get("/api/v1/api-keys")).json()["total"] == 1
    assert printed_keys(capsys.readouterr().out) == [], "the second start prints nothing"
    rows = _query(embedded, "SELECT key_hash, scopes FROM api_keys")
    assert len(rows) == 1
    assert key not in rows[0][0]
    assert json.loads(rows[0][1]) == ["admin"]


async def test_configured_admin_token_is_not_printed(
    embedded: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    token = "qv_configured_admin_token_0123456789"
    settings = embedded.model_copy(update={"admin_token": SecretStr(token)})
    async with running(settings, token) as client:
        assert (await client.get("/api/v1/skills")).status_code == 200
    assert token not in capsys.readouterr().out


async def test_a_write_is_committed_before_its_response_starts(
    embedded: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client that sees 201 can read its write from any connection at once."""
    async with running(embedded) as anon:
        [key] = printed_keys(capsys.readouterr().out)
        app: FastAPI = anon.app  # type: ignore[attr-defined]
        seen = await _asgi_post(
            app,
            embedded,
            "/api/v1/skills",
            {"name": "durable", "content": "c"},
            key=key,
            probe="SELECT count(*) FROM skills WHERE name = 'durable'",
        )
    assert seen == {"status": 201, "rows": [(1,)]}


def _query(settings: Settings, sql: str) -> list[Any]:
    with contextlib.closing(sqlite3.connect(settings.data_dir / "quiver.db")) as conn:
        return conn.execute(sql).fetchall()


async def _asgi_post(
    app: FastAPI, settings: Settings, path: str, body: Any, *, key: str, probe: str
) -> dict[str, Any]:
    """Drive the ASGI app directly and run `probe` on a separate connection at response start."""
    seen: dict[str, Any] = {}
    done = asyncio.Event()
    sent_body = False

    async def receive() -> dict[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            seen["status"] = message["status"]
            seen["rows"] = _query(settings, probe)
        elif message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"quiver.test"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {key}".encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("quiver.test", 80),
        "state": {},
    }
    await app(scope, receive, send)
    return seen


async def test_a_revoked_key_is_refused_at_once_on_sqlite(
    embedded: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """One process, no NOTIFY: the commit itself drops the cached key."""
    async with running(embedded) as anon:
        [admin] = printed_keys(capsys.readouterr().out)
        headers = {"Authorization": f"Bearer {admin}"}
        created = await anon.post(
            "/api/v1/api-keys", json={"name": "short-lived", "scopes": ["admin"]}, headers=headers
        )
        assert created.status_code == 201, created.text
        key = {"Authorization": f"Bearer {created.json()['key']}"}
        for _ in range(2):  # the second answer comes from the cache
            assert (await anon.get("/api/v1/skills", headers=key)).status_code == 200
        revoked = await anon.delete(f"/api/v1/api-keys/{created.json()['id']}", headers=headers)
        assert revoked.status_code == 204
        assert (await anon.get("/api/v1/skills", headers=key)).status_code == 401
