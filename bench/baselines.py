"""The baselines `bench.side_by_side` measures Quiver against, as one small server.

- B1: a minimal FastAPI relay. POST /chat `{message, model?}` streams the model's reply
  (httpx, one shared pool) and relays every text chunk as an SSE frame in Quiver's framing
  (`run_started`, `model_delta`*, `run_finished`). No storage, no auth: the cost of the hop itself.
- B2: B1 plus a durable journal: every frame is stored before it is sent, in Postgres through
  asyncpg, all runs' pending events in one multi-row INSERT (`unnest`) per transaction; a
  frame goes out once its batch is committed. The least a durable gateway can do here.

Run: `python -m bench.baselines --mode b1|b2 --port P --llm URL [--dsn postgresql://...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal (
    run_id uuid NOT NULL,
    seq integer NOT NULL,
    kind text NOT NULL,
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
)
"""
INSERT = """
INSERT INTO journal (run_id, seq, kind, data)
SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[])
"""


def frame(seq: int, kind: str, data: dict[str, Any]) -> bytes:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"id: {seq}\nevent: {kind}\ndata: {body}\n\n".encode()


class Journal:
    """All runs' events, committed in batches: what queued while the last commit ran."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.queue: list[tuple[uuid.UUID, int, str, str, asyncio.Future[None]]] = []
        self.task: asyncio.Task[None] | None = None

    def store(self, run_id: uuid.UUID, seq: int, kind: str, data: str) -> asyncio.Future[None]:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.queue.append((run_id, seq, kind, data, done))
        if self.task is None or self.task.done():
            self.task = asyncio.create_task(self._drain())
        return done

    async def _drain(self) -> None:
        while self.queue:
            batch, self.queue = self.queue, []
            try:
                async with self.pool.acquire() as conn:
                    cols = list(zip(*batch, strict=True))
                    await conn.execute(INSERT, *(list(col) for col in cols[:4]))
            except Exception as exc:
                for *_, done in batch:
                    done.set_exception(exc)
                continue
            for *_, done in batch:
                done.set_result(None)


def build(mode: str, llm_url: str, dsn: str | None) -> FastAPI:
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
        state["http"] = httpx.AsyncClient(limits=limits, timeout=120)
        if mode == "b2":
            assert dsn, "B2 needs --dsn"
            pool = await asyncpg.create_pool(dsn, min_size=2, max_size=10)
            await pool.execute(SCHEMA)
            state["journal"] = Journal(pool)
        yield
        await state["http"].aclose()
        if "journal" in state:
            await state["journal"].pool.close()

    app = FastAPI(lifespan=lifespan)

    @app.post("/chat")
    async def chat(request: Request) -> StreamingResponse:
        body = await request.json()
        run_id = uuid.uuid4()
        journal: Journal | None = state.get("journal")
        seq = 0

        async def emit(kind: str, data: dict[str, Any]) -> bytes:
            nonlocal seq
            seq += 1
            if journal is not None:
                await journal.store(run_id, seq, kind, json.dumps(data))
            return frame(seq, kind, data)

        async def events() -> AsyncIterator[bytes]:
            yield await emit("run_started", {"run_id": str(run_id)})
            upstream = {
                "model": body.get("model", "bench"),
                "messages": [{"role": "user", "content": body["message"]}],
                "stream": True,
            }
            http: httpx.AsyncClient = state["http"]
            async with http.stream("POST", f"{llm_url}/chat/completions", json=upstream) as r:
                async for line in r.aiter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    text = (choices[0].get("delta") or {}).get("content")
                    if text:
                        yield await emit("model_delta", {"text": text})
            yield await emit("run_finished", {"status": "completed"})

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=["b1", "b2"], required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm", required=True, help="the model's base URL (…/v1)")
    parser.add_argument("--dsn", help="B2: a Postgres database for the journal")
    args = parser.parse_args()
    app = build(args.mode, args.llm.rstrip("/"), args.dsn)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
