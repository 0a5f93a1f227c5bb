"""The `openai` SDK against `quiver serve` as a real process on PostgreSQL (README's snippet)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from openai import AsyncOpenAI, NotFoundError

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN, clean_env, quiver_serve

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "app.cli", "serve"]


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    name = await create_database("quiver_openai")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        await drop_database(name)


@pytest.mark.timeout(240)
async def test_the_sdk_against_quiver_serve(
    pg_url: str, tmp_path: Path, scripted_llm: ScriptedLLM
) -> None:
    env = clean_env(
        QUIVER_DATABASE_URL=pg_url,
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_LLM_BASE_URL=scripted_llm.base_url,
        PYTHONPATH=str(ROOT),
    )
    with quiver_serve(SERVE, env=env, cwd=tmp_path, timeout_s=120) as served:
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        async with httpx.AsyncClient(base_url=served.base_url, headers=auth, timeout=30) as admin:
            created = await admin.post(
                "/api/v1/agents", json={"name": "helpdesk", "instructions": "Help."}
            )
            assert created.status_code == 201, created.text
            async with AsyncOpenAI(
                base_url=f"{served.base_url}/v1", api_key=ADMIN_TOKEN, max_retries=0
            ) as client:
                assert [m.id async for m in client.models.list()] == ["helpdesk"]

                scripted_llm.script(Turn(text="Streamed from a served Quiver.", usage=(9, 6)))
                stream = await client.chat.completions.create(
                    model="helpdesk",
                    messages=[{"role": "user", "content": "hello"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
                chunks = [c async for c in stream]
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
                assert text == "Streamed from a served Quiver."
                assert chunks[-1].usage is not None
                assert chunks[-1].usage.total_tokens == 15

                scripted_llm.script(Turn(text="Second answer.", usage=(20, 3)))
                raw = await client.chat.completions.with_raw_response.create(
                    model="helpdesk",
                    messages=[
                        {"role": "user", "content": "hello"},
                        {"role": "assistant", "content": text},
                        {"role": "user", "content": "and again?"},
                    ],
                )
                completion = raw.parse()
                assert completion.choices[0].message.content == "Second answer."
                assert completion.usage is not None
                assert completion.usage.total_tokens == 23
                sent = scripted_llm.requests[-1]["messages"]
                assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]

                with pytest.raises(NotFoundError):
                    await client.chat.completions.create(
                        model="nobody", messages=[{"role": "user", "content": "x"}]
                    )
            run = await admin.get(f"/api/v1/runs/{raw.headers['x-run-id']}")
            assert run.json()["status"] == "completed"
