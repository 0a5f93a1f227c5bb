"""More concurrent chats than the storage pool has connections (a deadlock found by bench.load)."""

from __future__ import annotations

import asyncio

import httpx

from tests.chat.conftest import CreateAgent
from tests.fixtures.live import SseEvent, read_sse

# SQLAlchemy's default pool: 5 connections + 10 overflow. Each chat request used to hold one
# for its API-key lookup while starting the run needed another: at 15 requests all waited.
CONCURRENT = 24


async def test_more_concurrent_chats_than_pooled_connections_all_complete(
    live: httpx.AsyncClient, create_agent: CreateAgent
) -> None:
    agent = await create_agent()

    async def one(i: int) -> SseEvent:
        body = {"agent_id": agent["id"], "message": f"hello {i}"}
        async with live.stream("POST", "/api/v1/chat", json=body) as resp:
            assert resp.status_code == 200, await resp.aread()
            return (await read_sse(resp))[-1]

    finals = await asyncio.gather(*(one(i) for i in range(CONCURRENT)))
    assert [(e.event, e.data["status"]) for e in finals] == [("run_finished", "completed")] * (
        CONCURRENT
    )
