"""Scale-out: chat runs/s and gateway CPU per run, `quiver serve --workers 1` vs `--workers 2`.

Set-up (all on 127.0.0.1, PostgreSQL required: several workers need it): the scripted LLM in
its own process (the `bench.load` reply: `REPLY_WORDS` words, `TOKEN_DELAY_S` apart), one
gateway with one worker and one with two, each on its own throwaway database, and this
process as the client. Both gateways run for the whole benchmark; rounds alternate between
them (`ROUNDS` times: 1 worker, then 2 workers) so a change in the machine's load hits both alike.

Per round and gateway, `CONCURRENCY` chat runs start at once (`bench.load.one_run`):
- runs/s: completed runs / wall time;
- CPU per run: user + system CPU of the gateway's whole process tree (the uvicorn parent and
  its workers, from /proc) during the round / completed runs;
- ttfe p50: time from POST /chat to its first SSE event;
- errors: as in `bench.load` (target 0).
The medians over the rounds are reported, and `speedup` = runs/s with 2 workers / with 1. On a
2-core machine the client and the scripted LLM compete with the workers for the cores, so the
speedup is bounded well below 2 there; CPU per run shows whether a second worker costs more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import print_table
from bench.load import (
    LEVEL_TIMEOUT_S,
    READ_TIMEOUT_S,
    REPLY,
    TOKEN_DELAY_S,
    Stats,
    _bounded,
    _warm,
    one_run,
    summarise,
)
from bench.servers import (
    Gateway,
    _postgres_up,
    gateway,
    raise_fd_limit,
    scripted_llm,
)

CONCURRENCY = 50
ROUNDS = 3
WORKERS = (1, 2)
_TICK = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its children (from /proc/<pid>/stat)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(entry.name) == pid or int(fields[1]) == pid:  # fields[1] is the parent pid
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


async def one_round(gw: Gateway, agent_id: str, n: int) -> dict[str, Any]:
    stats = Stats()
    async with gw.client(connections=n + 10, timeout_s=READ_TIMEOUT_S) as client:
        cpu = tree_cpu_s(gw.proc.pid)
        start = time.perf_counter()
        await _bounded([one_run(client, agent_id, stats) for _ in range(n)], LEVEL_TIMEOUT_S, stats)
        wall = time.perf_counter() - start
        cpu = tree_cpu_s(gw.proc.pid) - cpu
    out = summarise(stats, wall)
    out["cpu_per_run_ms"] = cpu * 1000 / max(1, stats.completed)
    return out


async def _run(concurrency: int, rounds: int) -> dict[str, Any]:
    if not await _postgres_up():
        return {"skipped": "PostgreSQL is not reachable on 127.0.0.1:5432 (needed for workers)"}
    raise_fd_limit()
    out: dict[str, Any] = {"concurrency": concurrency, "rounds": rounds}
    samples: dict[int, list[dict[str, Any]]] = {w: [] for w in WORKERS}
    async with (
        scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm,
        contextlib.AsyncExitStack() as stack,
    ):
        gateways = {
            w: await stack.enter_async_context(
                gateway(llm.base_url, database="postgres", workers=w)
            )
            for w in WORKERS
        }
        agents = {w: await gw.create_agent() for w, gw in gateways.items()}
        for w, gw in gateways.items():
            await _warm(gw, agents[w])
            await one_round(gw, agents[w], concurrency // 2)  # every worker warm
        for _ in range(rounds):
            for w, gw in gateways.items():
                samples[w].append(await one_round(gw, agents[w], concurrency))
    for w, rows in samples.items():
        out[f"workers_{w}"] = {
            "runs_per_s": statistics.median(r["runs_per_s"] for r in rows),
            "cpu_per_run_ms": statistics.median(r["cpu_per_run_ms"] for r in rows),
            "ttfe_p50_ms": statistics.median(r["ttfe_p50_ms"] for r in rows),
            "errors": sum(r["errors"] for r in rows),
            "rounds": rows,
        }
    one, two = out["workers_1"], out["workers_2"]
    out["speedup"] = two["runs_per_s"] / one["runs_per_s"] if one["runs_per_s"] else 0.0
    out["cpu_ratio"] = (
        two["cpu_per_run_ms"] / one["cpu_per_run_ms"] if one["cpu_per_run_ms"] else 0.0
    )
    return out


def run(concurrency: int = CONCURRENCY, rounds: int = ROUNDS) -> dict[str, Any]:
    return asyncio.run(_run(concurrency, rounds))


def print_results(r: dict[str, Any]) -> None:
    if "skipped" in r:
        print(f"skipped: {r['skipped']}")
        return
    rows = [
        [
            w,
            r[f"workers_{w}"]["runs_per_s"],
            r[f"workers_{w}"]["cpu_per_run_ms"],
            r[f"workers_{w}"]["ttfe_p50_ms"],
            r[f"workers_{w}"]["errors"],
        ]
        for w in WORKERS
    ]
    print(f"{r['concurrency']} concurrent chat runs, median of {r['rounds']} alternating rounds")
    print_table(rows, ["workers", "runs/s", "CPU ms/run", "ttfe p50 ms", "errors"])
    print(f"speedup 2 vs 1 worker: {r['speedup']:.2f}x; CPU per run 2 vs 1: {r['cpu_ratio']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description="quiver serve --workers 1 vs 2")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    print_results(run(args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
