"""`QUIVER_HISTORY_RETENTION_DAYS`: conversations idle for longer are deleted with their runs
and journals (at start, then hourly); recent ones and those of deleted agents stay until then.
Both stores, real runs."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
from sqlalchemy import update

from app.chat.models import Conversation, Run
from app.config import Settings
from app.db.base import utcnow
from app.db.engine import create_engine
from tests.chat.test_faults import gateway, new_agent
from tests.chat.test_faults import store as store  # the postgres / sqlite fixture
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


async def _chat(client: httpx.AsyncClient, agent_id: str) -> tuple[str, str]:
    async with client.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": "hi"}
    ) as resp:
        assert resp.status_code == 200
        await read_sse(resp)
        return resp.headers["x-conversation-id"], resp.headers["x-run-id"]


async def _age(settings: Settings, conversation_id: str, days: int) -> None:
    """Make the conversation and its runs `days` old (as if they happened then)."""
    then = utcnow() - timedelta(days=days)
    cid = uuid.UUID(conversation_id)
    engine = create_engine(settings)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                update(Conversation.__table__).where(Conversation.__table__.c.id == cid),
                {"created_at": then},
            )
            await conn.execute(
                update(Run.__table__).where(Run.__table__.c.conversation_id == cid),
                {"created_at": then},
            )
    finally:
        await engine.dispose()


async def test_idle_conversations_expire_after_the_retention_period(
    store: Settings, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(*[Turn(text="ok")] * 3)
    async with gateway(store) as client:
        agent_id = await new_agent(client)
        old, old_run = await _chat(client, agent_id)
        recent, _ = await _chat(client, agent_id)
        retired = await new_agent(client)
        orphan, _ = await _chat(client, retired)
        assert (await client.delete(f"/api/v1/agents/{retired}")).status_code == 204
    await _age(store, old, days=10)
    await _age(store, orphan, days=10)
    async with gateway(store) as client:  # retention off: nothing goes
        assert (await client.get(f"/api/v1/conversations/{old}")).status_code == 200
        assert (await client.get(f"/api/v1/conversations/{orphan}")).status_code == 200
    async with gateway(store, history_retention_days=7) as client:
        for _ in range(100):  # the sweep runs at start, in the background
            if (await client.get(f"/api/v1/conversations/{old}")).status_code == 404:
                break
            await asyncio.sleep(0.1)
        assert (await client.get(f"/api/v1/conversations/{old}")).status_code == 404
        assert (await client.get(f"/api/v1/runs/{old_run}")).status_code == 404
        assert (await client.get(f"/api/v1/runs/{old_run}/events")).status_code == 404
        assert (await client.get(f"/api/v1/conversations/{orphan}")).status_code == 404
        assert (await client.get(f"/api/v1/conversations/{recent}")).status_code == 200
