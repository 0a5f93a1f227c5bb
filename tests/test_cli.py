"""`quiver migrate` and `quiver create-key` against a throwaway SQLite database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet, InvalidToken

from app.apikeys.service import hash_key
from app.cli import main
from app.config import load_settings
from app.main import create_app
from app.security import crypto


@pytest.fixture
def db_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name in list(os.environ):
        if name.upper().startswith("QUIVER_"):
            monkeypatch.delenv(name)
    path = tmp_path / "cli.db"
    monkeypatch.setenv("QUIVER_DATABASE_URL", f"sqlite:///{path}")
    monkeypatch.setenv("QUIVER_DATA_DIR", str(tmp_path))
    saved = crypto._keyring
    yield path
    crypto._keyring = saved


def rows(path: Path, sql: str) -> list[Any]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


async def run(argv: list[str]) -> int:
    """The CLI runs its own event loop, so it gets a thread of its own."""
    return await asyncio.to_thread(main, argv)


async def status_with(key: str, path: str = "/api/v1/agents") -> int:
    app = create_app(load_settings())
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {key}"},
        ) as client,
    ):
        return (await client.get(path)).status_code


async def test_migrate_up_and_down(db_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert await run(["migrate"]) == 0
    assert capsys.readouterr().out == "migrations applied\n"
    tables = {name for (name,) in rows(db_file, "SELECT name FROM sqlite_master")}
    assert {"agents", "api_keys", "skills", "alembic_version"} <= tables
    assert await run(["migrate"]) == 0, "idempotent"

    assert await run(["migrate", "--down"]) == 0
    tables = {name for (name,) in rows(db_file, "SELECT name FROM sqlite_master")}
    assert "agents" not in tables


async def test_create_admin_key_prints_and_persists_a_working_key(
    db_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(["migrate"]) == 0
    capsys.readouterr()
    assert await run(["create-key", "--scope", "admin", "--name", "ops"]) == 0
    key = capsys.readouterr().out.strip()
    assert key.startswith("qv_")
    assert "\n" not in key

    [(name, key_hash, scopes)] = rows(db_file, "SELECT name, key_hash, scopes FROM api_keys")
    assert (name, key_hash, json.loads(scopes)) == ("ops", hash_key(key), ["admin"])
    assert await status_with(key) == 200
    assert "qv_" not in capsys.readouterr().out, "an admin key exists: no key generated at start"


async def test_create_key_migrates_first_and_defaults_to_chat(
    db_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run(["create-key"]) == 0, "works on a fresh database"
    key = capsys.readouterr().out.strip()
    [(scopes,)] = rows(db_file, "SELECT scopes FROM api_keys")
    assert json.loads(scopes) == ["chat"]
    assert await status_with(key) == 403
    assert await status_with("qv_not_issued") == 401


def test_unknown_scope_is_a_usage_error(db_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["create-key", "--scope", "root"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
    assert not db_file.exists()


async def test_rotate_secrets_on_sqlite(
    db_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the generated key file to QUIVER_SECRET_KEYS=new,old: one command, then old retires."""
    assert await run(["create-key", "--scope", "admin"]) == 0
    key = capsys.readouterr().out.strip()
    app = create_app(load_settings())
    body = {
        "name": "api",
        "base_url": "https://a.test",
        "auth_type": "bearer",
        "credentials": {"token": "tok-sqlite-rotate"},
    }
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {key}"},
        ) as client,
    ):
        assert (await client.post("/api/v1/connectors", json=body)).status_code == 201
    old = (db_file.parent / "secret.key").read_text().strip()
    new = Fernet.generate_key().decode()

    monkeypatch.setenv("QUIVER_SECRET_KEYS", f"{new},{old}")
    assert await run(["rotate-secrets"]) == 0
    assert "connectors=1" in capsys.readouterr().out
    [(token,)] = rows(db_file, "SELECT credentials FROM connectors")
    with pytest.raises(InvalidToken):
        Fernet(old.encode()).decrypt(token.encode())
    assert json.loads(Fernet(new.encode()).decrypt(token.encode())) == body["credentials"]

    monkeypatch.setenv("QUIVER_SECRET_KEYS", new)
    assert await status_with(key, "/api/v1/connectors") == 200


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("postgresql://postgres:pw-hidden@127.0.0.1:5432/quiver_no_such_db_h5", "does not exist"),
        ("postgresql://postgres:pw-hidden@127.0.0.1:1/quiver", "Connect call failed"),
    ],
)
@pytest.mark.parametrize("command", ["serve", "migrate"])
def test_an_unusable_database_is_one_clear_line(
    command: str, url: str, reason: str, tmp_path: Path
) -> None:
    """The real CLI process: one line on stderr naming the database, no traceback, exit 1."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("QUIVER_")}
    env.update(QUIVER_DATABASE_URL=url, QUIVER_DATA_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", command],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("quiver: cannot use the database postgresql://postgres:***@127.0.0.1:")
    assert reason in line
    assert "pw-hidden" not in line


def test_serve_refuses_several_workers_on_sqlite(
    db_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert "--workers > 1 needs PostgreSQL" in err
    assert not db_file.exists()  # refused before migrating anything
