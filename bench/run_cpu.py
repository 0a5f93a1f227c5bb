"""Gateway CPU per run at N concurrent, for one or more checkouts of Quiver side by side.

Meant for before/after comparisons of a change to the run path on a shared, noisy machine:
wall-clock numbers move with the load of everything else, the CPU the gateway process itself
spent (utime + stime from /proc/<pid>/stat) much less. The scripted LLM runs once (its CLI,
`bench.load`'s 24-word reply, 20 ms between chunks); for each round and each checkout a fresh
`quiver serve` of that checkout on a throwaway Postgres database is warmed with 10 runs, then
serves `--batches` bursts of N concurrent runs (new conversations, one key). Reported per
checkout: median CPU per completed run, median first-event p50, errors.

Run: `.venv/bin/python -m bench.run_cpu --roots /path/to/old,/path/to/new [--n 50]`, where
each root is a checkout (e.g. `git worktree add --detach /tmp/old <ref>`); default: this one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench import servers
from bench.common import percentile, print_table
from bench.load import REPLY, TOKEN_DELAY_S, Stats, _warm, one_run
from bench.servers import gateway, raise_fd_limit, scripted_llm


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(llm: servers.Llm, root: Path, n: int, batches: int) -> list[dict[str, Any]]:
    servers.ROOT = root  # `quiver serve` runs from this checkout
    async with gateway(llm.base_url, database="postgres") as gw:
        agent_id = await gw.create_agent()
        await _warm(gw, agent_id)
        out = []
        for _ in range(batches):
            stats = Stats()
            before, start = cpu_seconds(gw.proc.pid), time.perf_counter()
            async with gw.client(connections=n + 10) as client:
                await asyncio.gather(*(one_run(client, agent_id, stats) for _ in range(n)))
            spent = cpu_seconds(gw.proc.pid) - before
            out.append(
                {
                    "cpu_ms_per_run": spent * 1000 / max(1, stats.completed),
                    "ttfe_p50_ms": percentile(stats.ttfe, 50) * 1000 if stats.ttfe else 0.0,
                    "wall_s": time.perf_counter() - start,
                    "errors": sum(stats.errors.values()),
                }
            )
        return out


async def _run(roots: list[Path], n: int, rounds: int, batches: int) -> dict[str, Any]:
    raise_fd_limit()
    samples: dict[str, list[dict[str, Any]]] = {str(r): [] for r in roots}
    original = servers.ROOT
    try:
        async with scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm:
            for _ in range(rounds):
                for root in roots:
                    samples[str(root)] += await _measure(llm, root, n, batches)
    finally:
        servers.ROOT = original
    return {
        root: {
            "concurrency": n,
            "bursts": len(s),
            "cpu_ms_per_run": statistics.median(x["cpu_ms_per_run"] for x in s),
            "ttfe_p50_ms": statistics.median(x["ttfe_p50_ms"] for x in s),
            "errors": sum(x["errors"] for x in s),
        }
        for root, s in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway CPU per run, checkouts side by side")
    parser.add_argument("--roots", default=str(servers.ROOT), help="comma-separated checkouts")
    parser.add_argument("--n", type=int, default=50, help="concurrent runs per burst")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--batches", type=int, default=3, help="bursts per gateway")
    args = parser.parse_args()
    roots = [Path(r).resolve() for r in args.roots.split(",")]
    result = asyncio.run(_run(roots, args.n, args.rounds, args.batches))
    first = result[str(roots[0])]["cpu_ms_per_run"]
    rows = []
    for root, m in result.items():
        cpu = m["cpu_ms_per_run"]
        rows.append([root, m["bursts"], cpu, cpu / first, m["ttfe_p50_ms"], m["errors"]])
    print_table(rows, ["checkout", "bursts", "CPU ms/run", "vs first", "first event p50", "err"])


if __name__ == "__main__":
    main()
