"""What traces cost: gateway CPU per run and first event with tracing off and on.

Variants, each a fresh `quiver serve` on a throwaway Postgres database per round, in a new
random order every round (the scripted LLM of `bench.load`, bursts of N concurrent runs):
- `off`: this checkout, no OTLP endpoint (the default);
- `on`: this checkout exporting every span to an OTLP/HTTP sink on 127.0.0.1 (a run makes
  ~6 spans: the request's, FastAPI's operation spans, `invoke_agent`, `chat`);
- `before` (with `--before PATH`): another checkout, e.g. a worktree of the commit before
  tracing was added, to show that `off` costs what no tracing code at all costs.
Ratios against `off` are printed per round, then the medians.

Run: `.venv/bin/python -m bench.tracing [--before /tmp/before] [--n 50 --rounds 3]`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench import servers
from bench.common import percentile, print_table
from bench.load import REPLY, TOKEN_DELAY_S, Stats, _warm, one_run
from bench.run_cpu import cpu_seconds
from bench.servers import gateway, raise_fd_limit, scripted_llm
from tests.fixtures.threaded_server import ThreadedServer


class OtlpSink:
    """Accepts OTLP/HTTP exports and counts their bytes (a collector that keeps nothing)."""

    def __init__(self) -> None:
        self.bytes = 0
        self._lock = threading.Lock()
        self._http = ThreadedServer("otlp-sink")

    async def _traces(self, request: Request) -> Response:
        body = await request.body()
        with self._lock:
            self.bytes += len(body)
        return Response(status_code=200, media_type="application/x-protobuf")

    def start(self) -> str:
        self._http.start(Starlette(routes=[Route("/v1/traces", self._traces, methods=["POST"])]))
        return f"http://127.0.0.1:{self._http.port}"

    def stop(self) -> None:
        self._http.stop()


async def _variant(
    llm: servers.Llm, root: Path, env: dict[str, str], n: int, batches: int
) -> dict[str, float]:
    servers.ROOT = root
    async with gateway(llm.base_url, database="postgres", extra_env=env) as gw:
        agent_id = await gw.create_agent()
        await _warm(gw, agent_id)
        cpu, first, errors = [], [], 0
        for _ in range(batches):
            stats = Stats()
            before = cpu_seconds(gw.proc.pid)
            async with gw.client(connections=n + 10) as client:
                await asyncio.gather(*(one_run(client, agent_id, stats) for _ in range(n)))
            cpu.append((cpu_seconds(gw.proc.pid) - before) * 1000 / max(1, stats.completed))
            first.append(percentile(stats.ttfe, 50) * 1000 if stats.ttfe else 0.0)
            errors += sum(stats.errors.values())
        return {
            "cpu_ms_per_run": statistics.median(cpu),
            "ttfe_p50_ms": statistics.median(first),
            "errors": errors,
        }


async def _run(before: Path | None, n: int, rounds: int, batches: int) -> dict[str, Any]:
    raise_fd_limit()
    sink = OtlpSink()
    endpoint = sink.start()
    here = servers.ROOT
    variants: dict[str, tuple[Path, dict[str, str]]] = {
        "off": (here, {}),
        "on": (here, {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "500"}),
    }
    if before is not None:
        variants["before"] = (before, {})
    per_round: list[dict[str, dict[str, float]]] = []
    try:
        async with scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm:
            for _ in range(rounds):
                order = list(variants)
                random.shuffle(order)
                found = {}
                for name in order:
                    root, env = variants[name]
                    found[name] = await _variant(llm, root, env, n, batches)
                per_round.append(found)
    finally:
        servers.ROOT = here
        sink.stop()
    summary = {
        name: {
            key: statistics.median(r[name][key] for r in per_round)
            for key in ("cpu_ms_per_run", "ttfe_p50_ms")
        }
        | {"errors": sum(r[name]["errors"] for r in per_round)}
        for name in variants
    }
    return {
        "concurrency": n,
        "rounds": per_round,
        "summary": summary,
        "exported_bytes": sink.bytes,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="gateway CPU per run with tracing off and on")
    parser.add_argument("--before", help="another checkout to run beside (no tracing code)")
    parser.add_argument("--n", type=int, default=50, help="concurrent runs per burst")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batches", type=int, default=3, help="bursts per gateway and round")
    args = parser.parse_args()
    before = Path(args.before).resolve() if args.before else None
    result = asyncio.run(_run(before, args.n, args.rounds, args.batches))
    rows = []
    for i, found in enumerate(result["rounds"], 1):
        off = found["off"]
        for name, m in found.items():
            rows.append(
                [
                    i,
                    name,
                    m["cpu_ms_per_run"],
                    m["cpu_ms_per_run"] / off["cpu_ms_per_run"],
                    m["ttfe_p50_ms"],
                    m["ttfe_p50_ms"] / max(off["ttfe_p50_ms"], 1e-9),
                    m["errors"],
                ]
            )
    headers = ["round", "variant", "CPU ms/run", "vs off", "first event p50 ms", "vs off", "err"]
    print_table(rows, headers)
    off = result["summary"]["off"]
    print()
    print_table(
        [
            [name, m["cpu_ms_per_run"], m["cpu_ms_per_run"] / off["cpu_ms_per_run"], m["errors"]]
            for name, m in result["summary"].items()
        ],
        ["variant (median of rounds)", "CPU ms/run", "vs off", "err"],
    )
    print(f"\nexported {result['exported_bytes']} bytes of spans; {result['date']}")


if __name__ == "__main__":
    main()
