"""A rolling restart of two `quiver serve` processes under a steady stream of chat runs.

Two processes share one PostgreSQL database; the test's client acts as the load balancer:
it sends each run to the next live process and, when a process refuses (connection refused,
or 503 while it drains), sends it to another one. Half the clients follow their run's stream,
half drop it once the run has started (the run goes on in the background). Each process in
turn gets SIGTERM and is replaced by a new one. Every followed stream must end `completed`,
and every run's journal must hold an unbroken sequence ending in `run_finished` with the run
completed (not cancelled by the shutdown): 0 errors, 0 lost events.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.fixtures.database import create_database, drop_database
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import ADMIN_TOKEN, Served, clean_env, quiver_serve

ROOT = Path(__file__).resolve().parents[2]
CLIENTS = 6
REPLY = "the rolling restart lost nothing at all, every event arrived in order " * 2


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    name = await create_database("quiver_rolling")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        await drop_database(name)


@dataclass
class Balancer:
    """Round-robin over live processes, retrying on a refusal like a load balancer would."""

    urls: list[str]
    runs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    retried: int = 0
    _next: int = 0

    def pick(self) -> str:
        self._next += 1
        return self.urls[self._next % len(self.urls)]

    async def chat(self, http: httpx.AsyncClient, agent_id: str, *, follow: bool) -> None:
        """One run; `follow=False` leaves once the run is started (its stream is dropped, the
        run goes on in the background of the process that took it)."""
        for _attempt in range(40):
            url = self.pick()
            run_id = None
            try:
                async with http.stream(
                    "POST", f"{url}/api/v1/chat", json={"agent_id": agent_id, "message": "go"}
                ) as response:
                    if response.status_code == 503:
                        self.retried += 1
                        await asyncio.sleep(0.05)
                        continue
                    if response.status_code != 200:
                        self.errors.append(f"{response.status_code} {await response.aread()!r}")
                        return
                    run_id = response.headers["x-run-id"]
                    self.runs.append(run_id)
                    if not follow:
                        return
                    text = "".join([chunk async for chunk in response.aiter_text()])
            except httpx.TransportError as exc:
                if run_id is not None:  # the stream broke after the run started
                    self.errors.append(f"run {run_id}: stream broken ({type(exc).__name__})")
                    return
                # Refused or closed before any answer (a process stopping): not taken, retry.
                self.retried += 1
                await asyncio.sleep(0.05)
                continue
            if '"status":"completed"' not in text or "event: run_finished" not in text:
                self.errors.append(f"run {run_id} ended without completing: {text[-300:]!r}")
            return
        self.errors.append("no process took the run after 40 attempts")


@contextlib.contextmanager
def serving(env: dict[str, str], tmp_path: Path) -> Iterator[Served]:
    command = [sys.executable, "-m", "app.cli", "serve"]
    with quiver_serve(command, env=env, cwd=tmp_path, timeout_s=90) as served:
        yield served


def stop(served: Served) -> float:
    """SIGTERM and wait: the drain. Returns how long the process took to exit."""
    start = time.monotonic()
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(timeout=60)
    return time.monotonic() - start


async def journal_gaps(pg_url: str, run_ids: list[str]) -> list[str]:
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT run_id::text AS run, array_agg(seq ORDER BY seq) AS seqs,"
            " (array_agg(kind ORDER BY seq DESC))[1] AS last"
            " FROM run_events WHERE run_id = ANY($1::uuid[]) GROUP BY run_id",
            run_ids,
        )
        statuses = dict(
            await conn.fetch(
                "SELECT id::text, status FROM runs WHERE id = ANY($1::uuid[])", run_ids
            )
        )
    finally:
        await conn.close()
    found = {r["run"]: r for r in rows}
    gaps = []
    for run_id in run_ids:
        row = found.get(run_id)
        if row is None:
            gaps.append(f"{run_id}: no journal")
        elif list(row["seqs"]) != list(range(1, len(row["seqs"]) + 1)):
            gaps.append(f"{run_id}: sequence {list(row['seqs'])}")
        elif row["last"] != "run_finished" or statuses.get(run_id) != "completed":
            gaps.append(f"{run_id}: ends {row['last']} / {statuses.get(run_id)}")
    return gaps


@pytest.mark.timeout(420)
async def test_a_rolling_restart_loses_no_run_and_no_event(pg_url: str, tmp_path: Path) -> None:
    llm = ScriptedLLM(token_delay_s=0.03, default_turn=Turn(text=REPLY))
    llm.start()
    env = clean_env(
        QUIVER_DATABASE_URL=pg_url,
        QUIVER_DATA_DIR=str(tmp_path),
        QUIVER_LLM_BASE_URL=llm.base_url,
        QUIVER_DRAIN_TIMEOUT_S="20",
        PYTHONPATH=str(ROOT),
    )
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    try:
        with contextlib.ExitStack() as stack:
            first = stack.enter_context(serving(env, tmp_path))
            second = stack.enter_context(serving(env, tmp_path))
            balancer = Balancer(urls=[first.base_url, second.base_url])
            async with httpx.AsyncClient(headers=auth, timeout=60) as http:
                agent = await http.post(f"{first.base_url}/api/v1/agents", json={"name": "steady"})
                assert agent.status_code == 201, agent.text
                agent_id = agent.json()["id"]
                done = asyncio.Event()

                async def client(follow: bool) -> None:
                    while not done.is_set():
                        await balancer.chat(http, agent_id, follow=follow)
                        if not follow:
                            await asyncio.sleep(0.3)

                clients = [asyncio.create_task(client(i % 2 == 0)) for i in range(CLIENTS)]
                await asyncio.sleep(3)
                drains = []
                for old in (first, second):
                    before = len(balancer.runs)
                    drains.append(await asyncio.to_thread(stop, old))
                    new = stack.enter_context(serving(env, tmp_path))
                    balancer.urls = [u for u in balancer.urls if u != old.base_url] + [new.base_url]
                    await asyncio.sleep(3)
                    assert len(balancer.runs) > before, "runs went on during the restart"
                done.set()
                await asyncio.gather(*clients)
    finally:
        llm.stop()
    assert balancer.errors == [], balancer.errors[:5]
    assert len(balancer.runs) >= 20
    assert await journal_gaps(pg_url, balancer.runs) == []
    assert all(d < 20 for d in drains), f"each drain ended once its runs finished: {drains}"
