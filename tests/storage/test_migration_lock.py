"""Several `quiver migrate` (or `quiver serve`) processes started at once on an empty Postgres
database all succeed (an advisory lock serialises them; the later ones find the schema at head)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import httpx

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.served import ADMIN_TOKEN, clean_env, quiver_serve

REPO = Path(__file__).resolve().parents[2]


def _migrate(url: str, data_dir: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("QUIVER_")}
    env.update(QUIVER_DATABASE_URL=url, QUIVER_DATA_DIR=str(data_dir))
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "migrate"],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_concurrent_migrations_on_a_fresh_postgres_database_all_succeed(
    tmp_path: Path,
) -> None:
    for attempt in range(2):  # the race is not certain in one try; twice makes it likely
        name = await create_database(f"quiver_migrate_race{attempt}")
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
        try:
            procs = [_migrate(url, tmp_path) for _ in range(3)]
            outcomes = [await asyncio.to_thread(p.communicate, timeout=120) for p in procs]
            for proc, (out, err) in zip(procs, outcomes, strict=True):
                assert proc.returncode == 0, err
                assert "migrations applied" in out
            conn = await asyncpg.connect(url)
            try:
                versions = await conn.fetch("SELECT version_num FROM alembic_version")
            finally:
                await conn.close()
            assert len(versions) == 1
        finally:
            await drop_database(name)


def _serve_until_ready(url: str, cwd: Path) -> int:
    """One `quiver serve` on its own port: the status of an admin request once it is ready."""
    env = clean_env(QUIVER_DATABASE_URL=url, QUIVER_DATA_DIR=str(cwd), PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "app.cli", "serve"]
    with quiver_serve(command, env=env, cwd=cwd, timeout_s=120) as served:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        return httpx.get(f"{served.base_url}/api/v1/agents", headers=headers).status_code


async def test_two_serves_started_at_once_on_a_fresh_database_both_serve(tmp_path: Path) -> None:
    """Migrations and the admin key from `QUIVER_ADMIN_TOKEN` (stored once) under the lock."""
    name = await create_database("quiver_serve_race")
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        dirs = [tmp_path / "a", tmp_path / "b"]
        for d in dirs:
            d.mkdir()
        statuses = await asyncio.gather(
            *(asyncio.to_thread(_serve_until_ready, url, d) for d in dirs)
        )
        assert statuses == [200, 200]
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM api_keys") == 1
        finally:
            await conn.close()
    finally:
        await drop_database(name)
