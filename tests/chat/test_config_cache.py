"""Cached agents and API keys across workers: a write on one is seen at once on the other.

Worker A runs in this process, worker B is `quiver serve` in a child process (so nothing but
the database and its `NOTIFY` channel connects them); both on one Postgres database.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.chat.pgwrite import asyncpg_dsn
from app.config import Settings
from app.main import create_app
from tests.chat.conftest import unique
from tests.chat.test_faults import GatewayProcess, processes
from tests.conftest import ADMIN_TOKEN, SECRET_KEY
from tests.fixtures.database import migrated_postgres
from tests.fixtures.live import read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
NOTIFIED_S = 0.5
"""Time for a write's notification to reach the other worker (milliseconds when idle; the
writer answers before the other worker has heard it, so a loaded machine needs a margin)."""


@pytest.fixture(scope="module")
async def workers(
    data_dir: Path,
    scripted_llm_session: ScriptedLLM,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[str, str, Settings]]:
    """Two workers on a database of their own: a write another test's app announces on a
    shared one would drop these caches at a moment the tests cannot choose."""
    async with migrated_postgres(
        {
            "secret_keys": [SECRET_KEY],
            "admin_token": ADMIN_TOKEN,
            "data_dir": data_dir,
            "llm_base_url": scripted_llm_session.base_url,
        }
    ) as settings:
        log: Path = tmp_path_factory.mktemp("cache") / "gateway.log"
        with processes() as procs:
            other = GatewayProcess(settings, log)
            procs.append(other)
            async with serve_app(create_app(settings)) as here:
                await other.ready()
                yield here, other.url, settings


async def _chat_key(admin: httpx.AsyncClient) -> tuple[str, dict[str, str]]:
    created = await admin.post("/api/v1/api-keys", json={"name": unique("k"), "scopes": ["chat"]})
    assert created.status_code == 201, created.text
    return created.json()["id"], {"Authorization": f"Bearer {created.json()['key']}"}


async def _authenticated(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    """401 for a refused key; 404 (an unknown conversation) once the key is accepted."""
    response = await client.get(f"/api/v1/conversations/{uuid.uuid4()}", headers=headers)
    return response.status_code


async def _becomes(
    client: httpx.AsyncClient, headers: dict[str, str], status: int, within_s: float = 5.0
) -> int:
    """The status once the other worker has heard the notification (delivered in milliseconds,
    but after the writer's answer: a loaded machine can deliver it a little later)."""
    deadline = asyncio.get_running_loop().time() + within_s
    while True:
        seen = await _authenticated(client, headers)
        if seen == status or asyncio.get_running_loop().time() > deadline:
            return seen
        await asyncio.sleep(0.05)


async def test_a_key_revoked_on_one_worker_is_refused_at_once_on_the_other(
    workers: tuple[str, str, Settings],
) -> None:
    url_a, url_b, _ = workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, timeout=30) as b,
    ):
        key_id, key = await _chat_key(a)
        for _ in range(3):  # cached on both workers
            assert await _authenticated(b, key) == 404
            assert await _authenticated(a, key) == 404
        assert (await a.delete(f"/api/v1/api-keys/{key_id}")).status_code == 204
        assert await _authenticated(a, key) == 401  # the writer: at once
        assert await _becomes(b, key, 401) == 401


async def test_scope_changes_reach_the_other_worker(workers: tuple[str, str, Settings]) -> None:
    url_a, url_b, _ = workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, timeout=30) as b,
    ):
        key_id, key = await _chat_key(a)
        assert (await b.get("/api/v1/agents", headers=key)).status_code == 403
        patched = await a.patch(f"/api/v1/api-keys/{key_id}", json={"scopes": ["admin"]})
        assert patched.status_code == 200
        deadline = asyncio.get_running_loop().time() + 5.0
        while (status := (await b.get("/api/v1/agents", headers=key)).status_code) == 403:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        assert status == 200


async def test_keys_are_served_from_the_cache_until_a_write_is_announced(
    workers: tuple[str, str, Settings],
) -> None:
    """A row changed behind Quiver's back (plain SQL, no notification) is not seen while the
    cached copy is fresh: the cache is in effect. The next announced write drops it."""
    url_a, url_b, settings = workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, timeout=30) as b,
    ):
        # The notification of the key's own creation may reach B after B has cached the key,
        # which drops that entry: a second key pair is tried before the cache is called broken.
        for _attempt in range(3):
            key_id, key = await _chat_key(a)
            await asyncio.sleep(0.5)  # the creation's notification has reached B
            assert await _authenticated(b, key) == 404
            conn = await asyncpg.connect(asyncpg_dsn(settings.async_database_url))
            try:
                await conn.execute(
                    "UPDATE api_keys SET revoked_at = now() WHERE id = $1", uuid.UUID(key_id)
                )
            finally:
                await conn.close()
            if await _authenticated(b, key) == 404:  # served from the cache
                break
        else:
            pytest.fail("a row changed behind Quiver's back was read again: no cache in effect")
        other_id, _ = await _chat_key(a)  # any announced write to api_keys
        assert (await a.delete(f"/api/v1/api-keys/{other_id}")).status_code == 204
        assert await _becomes(b, key, 401) == 401


async def _run(client: httpx.AsyncClient, agent_id: str) -> int:
    response = await client.post("/api/v1/chat", json={"agent_id": agent_id, "message": "hi"})
    if response.status_code == 200:
        assert (await read_sse(response))[-1].event == "run_finished"
    return response.status_code


async def test_agent_edits_and_deletes_on_one_worker_reach_the_other(
    workers: tuple[str, str, Settings], scripted_llm: ScriptedLLM
) -> None:
    url_a, url_b, _ = workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        body = {"name": unique("cached"), "instructions": "Speak like the first draft."}
        agent_id = (await a.post("/api/v1/agents", json=body)).json()["id"]
        scripted_llm.script(*[Turn(text="ok")] * 4)
        assert await _run(b, agent_id) == 200
        assert await _run(b, agent_id) == 200
        assert "first draft" in scripted_llm.requests[-1]["messages"][0]["content"]

        edit = {"instructions": "Speak like the second draft."}
        assert (await a.patch(f"/api/v1/agents/{agent_id}", json=edit)).status_code == 200
        await asyncio.sleep(NOTIFIED_S)
        assert await _run(b, agent_id) == 200
        system = scripted_llm.requests[-1]["messages"][0]["content"]
        assert "second draft" in system
        assert "first draft" not in system

        skill = {"name": unique("skill"), "description": "Reads the weather.", "content": "x"}
        created = await a.post("/api/v1/skills", json=skill)
        assert created.status_code == 201, created.text
        link = {"skill_ids": [created.json()["id"]], "tool_categories": ["builtin", "skill"]}
        assert (await a.patch(f"/api/v1/agents/{agent_id}", json=link)).status_code == 200
        await asyncio.sleep(NOTIFIED_S)
        assert await _run(b, agent_id) == 200
        assert skill["name"] in scripted_llm.requests[-1]["messages"][0]["content"]

        assert (await a.delete(f"/api/v1/agents/{agent_id}")).status_code == 204
        await asyncio.sleep(NOTIFIED_S)
        assert await _run(b, agent_id) == 404


async def test_an_agent_deleted_behind_the_cache_is_a_404(
    workers: tuple[str, str, Settings], scripted_llm: ScriptedLLM
) -> None:
    """Deleted by plain SQL (no notification): worker B still holds it, and the run's insert
    meets the missing agent; the answer is the same 404 as for any unknown agent."""
    url_a, url_b, settings = workers
    async with (
        httpx.AsyncClient(base_url=url_a, headers=AUTH, timeout=30) as a,
        httpx.AsyncClient(base_url=url_b, headers=AUTH, timeout=30) as b,
    ):
        agent_id = (await a.post("/api/v1/agents", json={"name": unique("gone")})).json()["id"]
        scripted_llm.script(Turn(text="ok"))
        assert await _run(b, agent_id) == 200  # cached on B
        conn = await asyncpg.connect(asyncpg_dsn(settings.async_database_url))
        try:
            await conn.execute("DELETE FROM agents WHERE id = $1", uuid.UUID(agent_id))
        finally:
            await conn.close()
        assert await _run(b, agent_id) == 404
        assert await _run(a, agent_id) == 404
