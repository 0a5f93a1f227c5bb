"""Concurrent writers on SQLite (a real `quiver serve`): chats journaling in the background while
agents are updated (read, then write), skills created and knowledge documents added (read, a
conversion in a worker process, then the write). Every request succeeds: SQLite's single writer
makes them wait for each other, never answer "database is locked" (docs/operations.md,
"SQLite transactions")."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM
from tests.fixtures.served import Served
from tests.fixtures.stores import admin, served_on

ROUNDS = 3
EACH = 8
"""Requests of each kind in a round, all at once."""


@pytest.fixture
async def served(scripted_llm: ScriptedLLM, tmp_path: Path) -> AsyncIterator[Served]:
    scripted_llm.token_delay_s = 0.01  # each run journals its tokens over a while
    async with served_on("sqlite", tmp_path, QUIVER_LLM_BASE_URL=scripted_llm.base_url) as s:
        yield s


@pytest.mark.timeout(300)
async def test_concurrent_writers_on_sqlite_all_succeed(served: Served) -> None:
    async with admin(served) as client:
        agents = [
            (await client.post("/api/v1/agents", json={"name": f"a{i}"})).json()["id"]
            for i in range(EACH)
        ]
        kb = (await client.post("/api/v1/knowledge-bases", json={"name": "kb"})).json()["id"]

        async def chat(agent: str) -> tuple[str, Any]:
            body = {"agent_id": agent, "message": "hello"}
            async with client.stream("POST", "/api/v1/chat", json=body) as resp:
                if resp.status_code != 200:
                    return "chat", (resp.status_code, (await resp.aread())[:300])
                final = (await read_sse(resp))[-1]
                return "chat", (final.event, final.data.get("status"), final.data.get("code"))

        async def write(method: str, url: str, body: dict[str, Any]) -> tuple[str, Any]:
            resp = await client.request(method, url, json=body)
            return url.split("/")[3], (resp.status_code, resp.text[:300])

        answers: list[tuple[str, Any]] = []
        for r in range(ROUNDS):
            answers += await asyncio.gather(
                *(chat(agent) for agent in agents),
                *(
                    write("PATCH", f"/api/v1/agents/{a}", {"instructions": f"r{r} {a}"})
                    for a in agents
                ),
                *(
                    write("POST", "/api/v1/skills", {"name": f"s{r}-{i}", "content": "x " * 2000})
                    for i in range(EACH)
                ),
                *(
                    write(
                        "POST",
                        f"/api/v1/knowledge-bases/{kb}/documents",
                        {"name": f"d{r}-{i}", "text": f"# Part {i}\n\n" + "word " * 20_000},
                    )
                    for i in range(EACH)
                ),
            )
    failed = [
        (kind, answer)
        for kind, answer in answers
        if answer[0] not in (200, 201) and answer[:2] != ("run_finished", "completed")
    ]
    assert not failed, failed
    assert len(answers) == ROUNDS * EACH * 4
    assert "database is locked" not in served.output()
