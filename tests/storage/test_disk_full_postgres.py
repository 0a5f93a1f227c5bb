"""Storage full on Postgres (SQLSTATE 53100 `disk_full`): a throwaway cluster whose tablespace
lies on a small tmpfs (tests/fixtures/pg_cluster.py) holds Quiver's tables; a filler table
takes the last of the space. Every write then answers 503 `{error, detail}` — no 500, no reset
connection — nothing of it is stored, reads and `/readyz` go on, and once the filler is
dropped writes succeed again without a restart. The write-ahead log and the catalogs stay on
the cluster's own disk, as on a server whose data volume fills up."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.db.migrate import upgrade
from tests.fixtures.live import read_sse
from tests.fixtures.pg_cluster import pg_cluster
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN
from tests.fixtures.stores import served_at
from tests.storage.disk_full import answered, stored_conversations, stored_documents

SMALL_SPACE = 24_000_000
"""Bytes of the tmpfs under the tablespace: room for the schema, then the filler."""
ROUNDS = 8


@dataclass
class FullablePostgres:
    base_url: str
    dsn: str
    """Quiver's database, for the filler."""


@pytest.fixture
async def fullable(scripted_llm: ScriptedLLM, tmp_path: Path) -> AsyncIterator[FullablePostgres]:
    with pg_cluster(small_space=SMALL_SPACE) as cluster:
        conn = await asyncpg.connect(cluster.url)
        try:
            await conn.execute(f"CREATE TABLESPACE small LOCATION '{cluster.small_space}'")
            await conn.execute("CREATE DATABASE quiver")
            await conn.execute("ALTER DATABASE quiver SET default_tablespace = small")
        finally:
            await conn.close()
        dsn = cluster.url.rsplit("/", 1)[0] + "/quiver"
        await asyncio.to_thread(upgrade, Settings(database_url=dsn, data_dir=tmp_path))
        with served_at(
            dsn,
            tmp_path,
            QUIVER_LLM_BASE_URL=scripted_llm.base_url,
            QUIVER_JOURNAL_RETRY_S="3",  # a run whose events find no room fails in seconds
        ) as served:
            yield FullablePostgres(served.base_url, dsn)


async def _fill(dsn: str) -> int:
    """Rows of 2 KB (stored as they are: no compression, no TOAST) until not one more fits;
    the bytes taken."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("CREATE TABLE filler (b text)")
        await conn.execute("ALTER TABLE filler ALTER b SET STORAGE PLAIN")
        for batch in (1000, 100, 10, 1):
            while True:
                try:
                    await conn.execute(
                        "INSERT INTO filler SELECT repeat('x', 2000) "
                        f"FROM generate_series(1, {batch})"
                    )
                except asyncpg.DiskFullError:
                    break
        taken: int = await conn.fetchval("SELECT pg_relation_size('filler')")
        return taken
    finally:
        await conn.close()


async def _free(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DROP TABLE filler")
    finally:
        await conn.close()


def _words(n: int) -> str:
    """Text that does not compress: it needs as many pages as it is long."""
    return " ".join(secrets.token_hex(4) for _ in range(n))


@pytest.mark.timeout(300)
async def test_a_full_postgres_answers_503_and_works_again_once_there_is_room(
    fullable: FullablePostgres, scripted_llm: ScriptedLLM
) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=fullable.base_url, headers=headers, timeout=60) as client:
        kb = await client.post("/api/v1/knowledge-bases", json={"name": "kb"})
        assert kb.status_code == 201, kb.text
        documents = f"/api/v1/knowledge-bases/{kb.json()['id']}/documents"
        agent = await client.post("/api/v1/agents", json={"name": "a"})
        assert agent.status_code == 201, agent.text
        agent_id = agent.json()["id"]

        assert await _fill(fullable.dsn) > SMALL_SPACE // 2
        answers: list[tuple[str, int]] = []
        for i in range(ROUNDS):  # any connection error fails the test (no resets)
            skill = await client.post(
                "/api/v1/skills", json={"name": f"s{i}", "content": _words(2000)}
            )
            doc = await client.post(documents, json={"name": f"d{i}", "text": _words(3000)})
            chat = await client.post("/api/v1/chat", json={"agent_id": agent_id, "message": "hi"})
            answers += [("skill", answered(skill)), ("document", answered(doc))]
            answers.append(("chat", answered(chat)))
        assert answers == [(kind, 503) for kind, _ in answers], answers
        assert (await client.get("/readyz")).status_code == 200
        skills = (await client.get("/api/v1/skills")).json()
        assert skills["total"] == 0, skills
        assert await stored_documents(client, documents) == 0
        assert await stored_conversations(client) == 0

        # room again (an operator frees space): writes succeed without a restart
        await _free(fullable.dsn)
        skill = await client.post("/api/v1/skills", json={"name": "after", "content": _words(2000)})
        assert skill.status_code == 201, skill.text
        doc = await client.post(documents, json={"name": "after", "text": _words(3000)})
        assert doc.status_code == 201, doc.text
        assert await stored_documents(client, documents) == 1
        scripted_llm.script(Turn(text="hello again"))
        body = {"agent_id": agent_id, "message": "hi"}
        async with client.stream("POST", "/api/v1/chat", json=body) as resp:
            assert resp.status_code == 200, await resp.aread()
            final = (await read_sse(resp))[-1]
        assert (final.event, final.data["status"]) == ("run_finished", "completed")
        assert await stored_conversations(client) == 1
