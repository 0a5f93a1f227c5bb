"""The capacity model's inputs: what one chat run costs a gateway process and PostgreSQL.

One `quiver serve` on a throwaway Postgres database and the scripted LLM of `bench.load`
(24 words, 20 ms apart). After warming, bursts of N concurrent runs; per burst, from
`/proc/<pid>` and `pg_stat_database` of the run's database: gateway CPU per run, runs/s, RSS
per open run, PostgreSQL transactions and rows written per run, and the most server
connections the database had open during the burst (`numbackends`, sampled every 50 ms).
docs/operations.md turns these into a sizing rule.

Run: `.venv/bin/python -m bench.capacity [--n 50,200] [--batches 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import asyncpg

from bench.common import print_table
from bench.load import REPLY, TOKEN_DELAY_S, Stats, _warm, one_run
from bench.run_cpu import cpu_seconds
from bench.servers import Gateway, gateway, raise_fd_limit, scripted_llm

_STATS = (
    "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted AS rows, numbackends"
    " FROM pg_stat_database WHERE datname = current_database()"
)


async def _pg_stats(conn: asyncpg.Connection) -> asyncpg.Record:
    await conn.execute("SELECT pg_stat_clear_snapshot()")
    row = await conn.fetchrow(_STATS)
    assert row is not None
    return row


async def _burst(gw: Gateway, conn: asyncpg.Connection, agent_id: str, n: int) -> dict[str, Any]:
    stats = Stats()
    peak_backends, peak_rss = 0, gw.rss()
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak_backends, peak_rss
        while not done.is_set():
            peak_backends = max(peak_backends, (await _pg_stats(conn))["numbackends"])
            peak_rss = max(peak_rss, gw.rss())
            await asyncio.sleep(0.05)

    rss_before = gw.rss()
    before, cpu_before, start = await _pg_stats(conn), cpu_seconds(gw.proc.pid), time.perf_counter()
    sampler = asyncio.create_task(sample())
    async with gw.client(connections=n + 10) as client:
        await asyncio.gather(*(one_run(client, agent_id, stats) for _ in range(n)))
    wall = time.perf_counter() - start
    done.set()
    await sampler
    await asyncio.sleep(1.0)  # the statistics collector reports with a delay
    after = await _pg_stats(conn)
    runs = max(1, stats.completed)
    return {
        "runs": stats.completed,
        "runs_per_s": stats.completed / wall,
        "cpu_ms_per_run": (cpu_seconds(gw.proc.pid) - cpu_before) * 1000 / runs,
        "rss_kib_per_open_run": (peak_rss - rss_before) / 1024 / runs,
        "pg_transactions_per_run": (after["xact_commit"] - before["xact_commit"]) / runs,
        "pg_rows_written_per_run": (after["rows"] - before["rows"]) / runs,
        "pg_peak_connections": peak_backends,
        "errors": sum(stats.errors.values()),
    }


async def _run(levels: list[int], batches: int) -> dict[str, Any]:
    raise_fd_limit()
    out: dict[str, Any] = {}
    async with (
        scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm,
        gateway(llm.base_url, database="postgres") as gw,
    ):
        agent_id = await gw.create_agent()
        await _warm(gw, agent_id)
        conn = await asyncpg.connect(gw.database_url)
        try:
            for n in levels:
                bursts = [await _burst(gw, conn, agent_id, n) for _ in range(batches)]
                out[str(n)] = {key: statistics.median(b[key] for b in bursts) for key in bursts[0]}
            out["rss_idle_mib"] = gw.rss() / 2**20
        finally:
            await conn.close()
    out["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return out


def run(levels: str = "50,200", batches: int = 3) -> dict[str, Any]:
    return asyncio.run(_run([int(x) for x in levels.split(",")], batches))


def main() -> None:
    parser = argparse.ArgumentParser(description="what one chat run costs, for sizing")
    parser.add_argument("--n", default="50,200", help="comma-separated burst sizes")
    parser.add_argument("--batches", type=int, default=3)
    args = parser.parse_args()
    result = run(args.n, args.batches)
    keys = [k for k in result[args.n.split(",")[0]] if k != "runs"]
    rows = [[n, *(result[n][k] for k in keys)] for n in args.n.split(",")]
    print_table(rows, ["concurrent", *keys])
    print(f"\nidle RSS {result['rss_idle_mib']:.0f} MiB; {result['date']}")


if __name__ == "__main__":
    main()
