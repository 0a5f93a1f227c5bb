"""Storage full (SQLite under a file-size limit, RLIMIT_FSIZE: works as any user, no mount):
every write answers 503 `{error, detail}` — no plain-text 500, no connection reset — what
answered 201 is kept whole, what answered 503 left nothing, and the service takes writes again
once there is room.

Room then comes back in small steps with a knowledge document tried at each, so some document
meets the limit after its row and before its chunks: before the fix (app/db/engine.py,
`_sqlite_transactions`) such a document stayed without its chunks."""

from __future__ import annotations

import asyncio
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.db.migrate import upgrade
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN, clean_env, free_port
from tests.storage.disk_full import answered, stored_conversations, stored_documents

REPO = Path(__file__).resolve().parents[2]
ROOM = 1_500_000
"""Bytes the database file may grow by before the disk is "full"."""
EDGE_STEP = 32_768
EDGE_STEPS = 20
EDGE_TEXT = "e " * 20_000
"""A document of 40 KB: stored whole, it needs ~6 steps of room; its row alone, 2."""


def _limited(limit: int) -> None:
    """In the child: files may not grow past `limit` (soft; the hard limit stays, so the test
    can make room later), and crossing it is an EFBIG error, not a SIGXFSZ kill."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


@pytest.fixture
def full_disk_server(tmp_path: Path, scripted_llm: ScriptedLLM) -> Iterator[tuple[str, int]]:
    data = tmp_path / "data"
    env = clean_env(
        QUIVER_DATA_DIR=str(data),
        QUIVER_LLM_BASE_URL=scripted_llm.base_url,
        QUIVER_ADMIN_TOKEN=ADMIN_TOKEN,
        QUIVER_JOURNAL_RETRY_S="3",  # a run whose events find no room fails in seconds
        PYTHONPATH=str(REPO),
    )
    settings = Settings(database_url="", data_dir=data)
    upgrade(settings)
    limit = (data / "quiver.db").stat().st_size + ROOM
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env={**env, "QUIVER_SECRET_KEYS": env["QUIVER_SECRET_KEYS"]},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,  # a log file would hit the limit too
        stderr=subprocess.DEVNULL,
        preexec_fn=lambda: _limited(limit),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 150
        while True:
            assert proc.poll() is None, "quiver serve exited"
            assert time.monotonic() < deadline, "/readyz not 200"
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        yield base, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def test_a_full_disk_answers_503_and_keeps_nothing_half_written(
    full_disk_server: tuple[str, int], scripted_llm: ScriptedLLM
) -> None:
    base, pid = full_disk_server
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        kb = await client.post("/api/v1/knowledge-bases", json={"name": "kb"})
        assert kb.status_code == 201, kb.text
        documents = f"/api/v1/knowledge-bases/{kb.json()['id']}/documents"
        agent = await client.post("/api/v1/agents", json={"name": "filler"})
        assert agent.status_code == 201, agent.text
        created = {"skills": 0, "documents": 0}
        refused = 0
        statuses: list[Any] = []
        for i in range(60):  # any connection error fails the test (no resets)
            skill = await client.post(
                "/api/v1/skills", json={"name": f"s{i}", "content": f"step {i} " * 12_000}
            )
            doc = await client.post(documents, json={"name": f"d{i}", "text": f"w{i} " * 25_000})
            statuses.append((i, skill.status_code, doc.status_code))
            for key, resp in (("skills", skill), ("documents", doc)):
                if answered(resp) == 201:
                    created[key] += 1
                else:
                    refused += 1
            if refused >= 6:
                break
        assert refused >= 6, "the disk never filled up"
        scripted_llm.script(Turn(text="hello"))
        chat = await client.post(
            "/api/v1/chat", json={"agent_id": agent.json()["id"], "message": "x " * 50_000}
        )
        assert answered(chat) in (200, 503)

        # The edge: room comes back a little at a time, a document tried at each step, so
        # some document meets the limit half-way (its row fits, its chunks do not).
        soft, hard = await asyncio.to_thread(resource.prlimit, pid, resource.RLIMIT_FSIZE)
        edge: list[int] = []
        for step in range(1, EDGE_STEPS + 1):
            room = (soft + step * EDGE_STEP, hard)
            await asyncio.to_thread(resource.prlimit, pid, resource.RLIMIT_FSIZE, room)
            doc = await client.post(documents, json={"name": f"e{step}", "text": EDGE_TEXT})
            edge.append(answered(doc))
        assert 503 in edge, edge
        created["documents"] += edge.count(201)

        # What answered 201 is there, what answered 503 is not, each write whole.
        skills = (await client.get("/api/v1/skills", params={"limit": 200})).json()
        assert skills["total"] == created["skills"], statuses
        for item in skills["items"]:
            stored = (await client.get(f"/api/v1/skills/{item['id']}")).json()
            assert stored["content"].startswith("step "), "a stored skill is whole"
        total = await stored_documents(client, documents)
        assert total == created["documents"], (statuses, edge)
        assert 201 in edge, f"no document fitted at the edge: {edge}"
        assert await stored_conversations(client) == (1 if chat.status_code == 200 else 0)
        assert (await client.get("/readyz")).status_code == 200

        # room again: writes succeed without a restart
        await asyncio.to_thread(
            resource.prlimit, pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2
        )
        after = await client.post("/api/v1/skills", json={"name": "after", "content": "ok"})
        assert after.status_code == 201, after.text
