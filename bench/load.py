"""Load: N concurrent SSE chat runs against a real Quiver process, then a soak.

Set-up (all on 127.0.0.1): the scripted LLM in its own process (its CLI; a reply of
`REPLY_WORDS` words, `TOKEN_DELAY_S` between chunks, so a run streams for ~0.5 s), Quiver in
another (`quiver serve` on a throwaway Postgres database, or a SQLite file in a temp dir when
Postgres is absent; `database` in the results says which), and this process as the client
(one httpx pool sized for the largest level). A fresh gateway per level, so each level's RSS
starts from the same warmed-up baseline (`WARMUP_RUNS` sequential runs first).

Per level N (all N runs started at once):
- runs/s and events/s: completed runs and SSE events / wall time of the level;
- ttfe: time from sending POST /chat to its first SSE event (`run_started`), p50/p99;
- gap: time between consecutive SSE events of one run (all runs pooled), p50/p99;
- run: time from sending the POST to `run_finished`, p50/p99;
- errors: non-200 answers, transport errors, runs not ending in `run_finished` /
  `completed` (target 0);
- rss_per_stream_kib: (peak gateway RSS while streams are open - RSS before the level) /
  the peak number of simultaneously open streams (`peak_open`, reported too).

Soak: `SOAK_CONCURRENCY` clients each running chats back to back for `soak_s` seconds (60 s
in the suite, 15 s with --quick, 300 s with `python -m bench.load --soak`). Gateway RSS is
sampled every second; growth = median RSS of the last 10% of the time / median RSS of the
10% right after a warm-up of 20% of the time, minus 1 (target ≤ 10%).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.common import percentile, print_table
from bench.servers import Gateway, Llm, gateway, raise_fd_limit, scripted_llm

LEVELS = (50, 200, 500)
QUICK_LEVELS = (50, 200)
SOAK_CONCURRENCY = 100
SOAK_S = 60.0
QUICK_SOAK_S = 15.0
FULL_SOAK_S = 300.0
WARMUP_RUNS = 10
TOKEN_DELAY_S = 0.02
REPLY_WORDS = 24
REPLY = " ".join(f"word{i}" for i in range(REPLY_WORDS))
MESSAGE = "Summarise the status of the deploy."
LEVEL_TIMEOUT_S = 420.0
READ_TIMEOUT_S = 120.0


@dataclass
class Stats:
    ttfe: list[float] = field(default_factory=list)
    gaps: list[float] = field(default_factory=list)
    runs: list[float] = field(default_factory=list)
    events: int = 0
    completed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    open: int = 0
    peak_open: int = 0


async def one_run(client: httpx.AsyncClient, agent_id: str, stats: Stats) -> None:
    start = time.perf_counter()
    last_at = 0.0
    kind = status = ""
    opened = False
    try:
        body = {"agent_id": agent_id, "message": MESSAGE}
        async with client.stream("POST", "/api/v1/chat", json=body) as response:
            if response.status_code != 200:
                stats.errors[f"http_{response.status_code}"] += 1
                await response.aread()
                return
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    now = time.perf_counter()
                    kind = line[6:].strip()
                    stats.events += 1
                    if not opened:
                        opened = True
                        stats.ttfe.append(now - start)
                        stats.open += 1
                        stats.peak_open = max(stats.peak_open, stats.open)
                    else:
                        stats.gaps.append(now - last_at)
                    last_at = now
                elif line.startswith("data:") and kind == "run_finished":
                    status = str(json.loads(line[5:]).get("status"))
    except (httpx.HTTPError, ValueError) as exc:  # transport errors, unreadable frames
        stats.errors[type(exc).__name__] += 1
        return
    finally:
        if opened:
            stats.open -= 1
    if kind != "run_finished" or status != "completed":
        stats.errors[f"ended_{kind or 'empty'}_{status or 'none'}"] += 1
        return
    stats.completed += 1
    stats.runs.append(time.perf_counter() - start)


def _ms(values: list[float], p: float) -> float:
    return percentile(values, p) * 1000.0


def summarise(stats: Stats, wall_s: float) -> dict[str, Any]:
    return {
        "runs": stats.completed,
        "wall_s": wall_s,
        "runs_per_s": stats.completed / wall_s if wall_s else 0.0,
        "events_per_s": stats.events / wall_s if wall_s else 0.0,
        "events_per_run": stats.events / max(1, stats.completed),
        "ttfe_p50_ms": _ms(stats.ttfe, 50),
        "ttfe_p99_ms": _ms(stats.ttfe, 99),
        "gap_p50_ms": _ms(stats.gaps, 50),
        "gap_p99_ms": _ms(stats.gaps, 99),
        "run_p50_ms": _ms(stats.runs, 50),
        "run_p99_ms": _ms(stats.runs, 99),
        "errors": sum(stats.errors.values()),
        "error_kinds": dict(stats.errors),
        "peak_open": stats.peak_open,
    }


async def _sample_rss(
    gw: Gateway, samples: list[tuple[float, int, int]], stats: Stats, every_s: float
) -> None:
    start = time.perf_counter()
    while gw.proc.poll() is None:
        try:
            samples.append((time.perf_counter() - start, stats.open, gw.rss()))
        except (OSError, RuntimeError):
            return  # the gateway is gone; the level reports what it saw
        await asyncio.sleep(every_s)


async def _bounded(coros: list[Any], limit_s: float, stats: Stats) -> None:
    """Run all; whatever is still running after `limit_s` is cancelled and counted an error."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    _, pending = await asyncio.wait(tasks, timeout=limit_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    if pending:
        stats.errors["unfinished_at_time_limit"] += len(pending)


async def _stop(task: asyncio.Task[None]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def _warm(gw: Gateway, agent_id: str) -> None:
    stats = Stats()
    async with gw.client() as client:
        for _ in range(WARMUP_RUNS):
            await one_run(client, agent_id, stats)
    if stats.errors:
        raise RuntimeError(f"warm-up runs failed: {dict(stats.errors)}")


async def level(llm: Llm, n: int, database: str) -> dict[str, Any]:
    async with gateway(llm.base_url, database=database) as gw:
        agent_id = await gw.create_agent()
        await _warm(gw, agent_id)
        await asyncio.sleep(0.5)
        baseline = gw.rss()
        stats = Stats()
        samples: list[tuple[float, int, int]] = []
        sampler = asyncio.create_task(_sample_rss(gw, samples, stats, 0.05))
        async with gw.client(connections=n + 10, timeout_s=READ_TIMEOUT_S) as client:
            start = time.perf_counter()
            runs = [one_run(client, agent_id, stats) for _ in range(n)]
            await _bounded(runs, LEVEL_TIMEOUT_S, stats)
            wall = time.perf_counter() - start
        await _stop(sampler)
        open_rss = [rss for _, open_, rss in samples if open_ > 0]
        peak = max(open_rss) if open_rss else baseline
        out = summarise(stats, wall)
        out.update(
            concurrency=n,
            database=gw.database,
            rss_baseline_mib=baseline / 2**20,
            rss_peak_mib=peak / 2**20,
            rss_per_stream_kib=(peak - baseline) / 1024 / max(1, stats.peak_open),
        )
        return out


async def soak(
    llm: Llm, seconds: float, database: str, concurrency: int = SOAK_CONCURRENCY
) -> dict[str, Any]:
    async with gateway(llm.base_url, database=database) as gw:
        agent_id = await gw.create_agent()
        await _warm(gw, agent_id)
        stats = Stats()
        samples: list[tuple[float, int, int]] = []
        deadline = time.perf_counter() + seconds

        async def worker(client: httpx.AsyncClient) -> None:
            while time.perf_counter() < deadline:
                await one_run(client, agent_id, stats)

        sampler = asyncio.create_task(_sample_rss(gw, samples, stats, 1.0))
        async with gw.client(connections=concurrency + 10, timeout_s=READ_TIMEOUT_S) as client:
            start = time.perf_counter()
            workers = [worker(client) for _ in range(concurrency)]
            await _bounded(workers, seconds + LEVEL_TIMEOUT_S, stats)
            wall = time.perf_counter() - start
        await _stop(sampler)
        out = summarise(stats, wall)
        out.update(
            concurrency=concurrency,
            duration_s=seconds,
            database=gw.database,
            rss_samples_mib=[[round(t, 1), round(rss / 2**20, 1)] for t, _, rss in samples],
            **rss_growth(samples, seconds),
        )
        return out


def rss_growth(samples: list[tuple[float, int, int]], seconds: float) -> dict[str, float]:
    """Median RSS just after warm-up (20% of the time) vs over the last 10% of the time."""
    warm_end, tail = 0.2 * seconds, 0.1 * seconds
    after = [rss for t, _, rss in samples if warm_end <= t < warm_end + tail] or [samples[0][2]]
    end = [rss for t, _, rss in samples if t >= seconds - tail] or [samples[-1][2]]
    a, e = statistics.median(after), statistics.median(end)
    return {
        "rss_after_warmup_mib": a / 2**20,
        "rss_end_mib": e / 2**20,
        "rss_max_mib": max(rss for _, _, rss in samples) / 2**20,
        "rss_growth_pct": 100.0 * (e / a - 1.0),
    }


async def _run(levels: tuple[int, ...], soak_s: float, database: str) -> dict[str, Any]:
    raise_fd_limit()
    out: dict[str, Any] = {"token_delay_ms": TOKEN_DELAY_S * 1000, "reply_words": REPLY_WORDS}
    async with scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm:
        for n in levels:
            out[f"c{n}"] = await level(llm, n, database)
        if soak_s > 0:
            out["soak"] = await soak(llm, soak_s, database)
    return out


def run(quick: bool = False, database: str = "auto") -> dict[str, Any]:
    levels = QUICK_LEVELS if quick else LEVELS
    return asyncio.run(_run(levels, QUICK_SOAK_S if quick else SOAK_S, database))


def print_results(r: dict[str, Any]) -> None:
    rows = []
    for key, m in r.items():
        if not isinstance(m, dict):
            continue
        rows.append(
            [
                key,
                m["concurrency"],
                m["runs"],
                m["errors"],
                m["runs_per_s"],
                m["events_per_s"],
                m["ttfe_p50_ms"],
                m["ttfe_p99_ms"],
                m["gap_p50_ms"],
                m["gap_p99_ms"],
                m["run_p50_ms"],
                m["run_p99_ms"],
                m.get("rss_per_stream_kib", ""),
                m.get("rss_growth_pct", ""),
            ]
        )
    print_table(
        rows,
        [
            "level",
            "conc",
            "runs",
            "err",
            "runs/s",
            "events/s",
            "ttfe p50",
            "ttfe p99",
            "gap p50",
            "gap p99",
            "run p50",
            "run p99",
            "KiB/stream",
            "soak RSS %",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Quiver SSE load and soak")
    parser.add_argument("--soak", action="store_true", help="only the soak (default 300 s)")
    parser.add_argument("--soak-s", type=float, default=None)
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--database", choices=["auto", "postgres", "sqlite"], default="auto")
    args = parser.parse_args()
    if args.soak:
        soak_s = args.soak_s or FULL_SOAK_S
        levels: tuple[int, ...] = ()
    else:
        soak_s = SOAK_S if args.soak_s is None else args.soak_s
        levels = tuple(int(x) for x in args.levels.split(",") if x)
    r = asyncio.run(_run(levels, soak_s, args.database))
    print(f"database: {next(m['database'] for m in r.values() if isinstance(m, dict))}")
    print_results(r)


if __name__ == "__main__":
    main()
