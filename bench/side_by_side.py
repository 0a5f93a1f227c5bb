"""Quiver side by side with the baselines and a peer, in one invocation (issues #15 and #33).

The paths (`bench/chat_peers.py`: direct, B1, B2, Quiver, LiteLLM when installed, `--compare`'s
other checkout) each run in their own process in front of one scripted model (24 words, 20 ms
apart), driven by the same client (this process), with two models: one whose first text chunk
comes at once ("immediate") and one whose first text chunk comes 20 ms after its first chunk
("delayed").

`ROUNDS` rounds; in each, every (model, level) in a shuffled order, and for each the paths in
an order shuffled anew (a fixed rotation made one path look 23 % slower than its twin); then
`TTFT_CALLS` sequential calls per path and model, the pairs shuffled on every iteration.
Measured per round, reported as medians over the rounds with their spread, and as Quiver / B2
ratios per round:
- gateway CPU per run: the path's utime+stime from /proc/<pid>/stat (its child processes
  included) over the level / completed runs;
- runs/s: completed runs / wall time of the level (all N runs started at once);
- first event p50 (POST to the first SSE `data:` line) and first token p50 (to the first text
  chunk: `model_delta`, or an OpenAI delta with content) of the N runs started at once;
- time to first token alone: the sequential calls' first text chunk, direct vs each path;
- errors: non-200 answers, transport errors, streams without their final event.

Targets (issue #33): first token p50 at 200 started at once ≤ B2's, with either model; CPU per
run ≤ B2's at 50 and at 200; time to first token alone ≤ direct + 3 ms with the immediate
model; 0 errors. Run: `python -m bench.side_by_side [--quick] [--rounds N] [--levels 50,200]`
(`--levels ""`: the time to first token alone, no bursts).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.chat_peers import (
    MODELS,
    REPLY,
    REPLY_WORDS,
    TOKEN_DELAY_S,
    Target,
    baseline,
    cpu_seconds,
    direct,
    litellm,
    litellm_executable,
    quiver,
)
from bench.common import percentile
from bench.servers import raise_fd_limit, scripted_llm
from bench.side_by_side_report import print_results, print_round, summarise

ROUNDS = 3
LEVELS = (50, 200)
TTFT_CALLS = 30
WARMUP_RUNS = 10
LEVEL_TIMEOUT_S = 300.0
SETTLE_S = 0.5
"""Pause before each level: the previous level's connections settle."""


@dataclass
class Level:
    first_event: list[float] = field(default_factory=list)
    first_token: list[float] = field(default_factory=list)
    completed: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def one_run(client: httpx.AsyncClient, target: Target, model: str, out: Level) -> None:
    start = time.perf_counter()
    first_event = first_token = 0.0
    kind = ""
    finished = False
    try:
        body, headers = target.bodies[model], target.headers
        async with client.stream("POST", target.url, json=body, headers=headers) as response:
            if response.status_code != 200:
                out.error(f"http_{response.status_code}")
                await response.aread()
                return
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                    continue
                if not line.startswith("data:"):
                    continue
                now = time.perf_counter()
                first_event = first_event or now
                data = line[5:].strip()
                if target.openai:
                    if data == "[DONE]":
                        finished = True
                    elif not first_token:
                        choices = json.loads(data).get("choices") or [{}]
                        if (choices[0].get("delta") or {}).get("content"):
                            first_token = now
                elif kind == "model_delta":
                    first_token = first_token or now
                elif kind == "run_finished":
                    finished = json.loads(data).get("status") == "completed"
    except (httpx.HTTPError, ValueError) as exc:
        out.error(type(exc).__name__)
        return
    if not finished or not first_token:
        out.error(f"ended_{kind or 'early'}" if not finished else "no_token")
        return
    out.completed += 1
    out.first_event.append(first_event - start)
    out.first_token.append(first_token - start)


def burst_client(n: int) -> httpx.AsyncClient:
    """A client of its own for one level: N connections opened for the burst, none kept from
    an earlier one. One client shared by every level handed each path whatever connections
    the previous levels left in its pool, and a burst on 50 reused connections had its first
    event 2-3x later than one on new connections, on Quiver and B2 alike (the client's pool,
    not the server: docs/benchmarks.md, "Side by side III")."""
    limits = httpx.Limits(max_connections=n + 50, max_keepalive_connections=n)
    return httpx.AsyncClient(timeout=httpx.Timeout(120.0, pool=120.0), limits=limits)


async def level(target: Target, model: str, n: int) -> dict[str, Any]:
    """N runs started at once through one path, on new connections."""
    out = Level()
    async with burst_client(n) as client:
        cpu = cpu_seconds(target.pid)
        start = time.perf_counter()
        tasks = [asyncio.create_task(one_run(client, target, model, out)) for _ in range(n)]
        _, pending = await asyncio.wait(tasks, timeout=LEVEL_TIMEOUT_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        wall = time.perf_counter() - start
        cpu = cpu_seconds(target.pid) - cpu
    if pending:
        out.errors["unfinished_at_time_limit"] = len(pending)
    return {
        "cpu_ms_per_run": 1000 * cpu / max(1, out.completed),
        "runs_per_s": out.completed / wall,
        "first_event_p50_ms": 1000 * percentile(out.first_event, 50),
        "first_token_p50_ms": 1000 * percentile(out.first_token, 50),
        "errors": sum(out.errors.values()),
        "error_kinds": out.errors,
    }


async def ttft(
    client: httpx.AsyncClient,
    targets: list[Target],
    models: list[str],
    calls: int,
    rng: random.Random,
) -> dict[str, dict[str, dict[str, float]]]:
    """Sequential calls, every (path, model) once per iteration in a shuffled order: time to
    the first text chunk. The first 3 iterations warm up and are not counted."""
    samples = {t.name: {m: Level() for m in models} for t in targets}
    pairs = [(t, m) for t in targets for m in models]
    for i in range(calls + 3):
        rng.shuffle(pairs)
        for target, model in pairs:
            await one_run(client, target, model, samples[target.name][model] if i >= 3 else Level())
    return {
        name: {
            model: {
                "ttft_p50_ms": 1000 * percentile(s.first_token, 50),
                "first_event_p50_ms": 1000 * percentile(s.first_event, 50),
                "errors": float(sum(s.errors.values())),
            }
            for model, s in by_model.items()
        }
        for name, by_model in samples.items()
    }


async def _warm(client: httpx.AsyncClient, target: Target, models: list[str]) -> None:
    out = Level()
    for i in range(WARMUP_RUNS):
        await one_run(client, target, models[i % len(models)], out)
    if out.errors:
        raise RuntimeError(f"{target.name}: warm-up runs failed: {out.errors}")


async def _run(
    rounds: int,
    levels: tuple[int, ...],
    calls: int,
    peer: bool,
    compare: tuple[Path, ...] = (),
    models: tuple[str, ...] = tuple(MODELS),
    seed: int | None = None,
) -> dict[str, Any]:
    raise_fd_limit()
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    exe = litellm_executable() if peer else None
    out: dict[str, Any] = {
        "rounds": rounds,
        "levels": list(levels),
        "models": list(models),
        "seed": seed,
        "token_delay_ms": TOKEN_DELAY_S * 1000,
        "reply_words": REPLY_WORDS,
        "litellm": exe or "not installed",
        "load_avg": [os.getloadavg()],
    }
    immediate = (MODELS["immediate"],)
    async with contextlib.AsyncExitStack() as stack:
        llm = await stack.enter_async_context(
            scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY, immediate_models=immediate)
        )
        targets = [
            await stack.enter_async_context(baseline("b1", llm)),
            await stack.enter_async_context(baseline("b2", llm)),
            await quiver(stack, llm, "Quiver"),
        ]
        for root in compare:
            targets.append(await quiver(stack, llm, f"Quiver@{root.name}", root))
        if exe:
            targets.append(await stack.enter_async_context(litellm(llm, exe)))
        limits = httpx.Limits(
            max_connections=max(levels, default=0) + 50, max_keepalive_connections=50
        )
        client = await stack.enter_async_context(
            httpx.AsyncClient(timeout=httpx.Timeout(120.0, pool=120.0), limits=limits)
        )
        for target in targets:
            await _warm(client, target, list(models))
        names = [t.name for t in targets]
        raw: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
            t.name: {m: {str(n): [] for n in levels} for m in models} for t in targets
        }
        ttft_raw: dict[str, dict[str, list[dict[str, float]]]] = {
            name: {m: [] for m in models} for name in ("direct", *names)
        }
        out["levels_raw"], out["ttft_raw"] = raw, ttft_raw
        for r in range(rounds):
            units = [(m, n) for m in models for n in levels]
            rng.shuffle(units)
            for model, n in units:
                order = list(targets)
                rng.shuffle(order)
                for target in order:
                    await asyncio.sleep(SETTLE_S)
                    raw[target.name][model][str(n)].append(await level(target, model, n))
            paths = [direct(llm), *targets]
            for name, by_model in (await ttft(client, paths, list(models), calls, rng)).items():
                for model, sample in by_model.items():
                    ttft_raw[name][model].append(sample)
            out["load_avg"].append(os.getloadavg())
            print_round(out, r)
    summarise(out)
    return out


def run(quick: bool = False, peer: bool = True) -> dict[str, Any]:
    rounds = 1 if quick else ROUNDS
    calls = 10 if quick else TTFT_CALLS
    return asyncio.run(_run(rounds, LEVELS, calls, peer))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, 10 TTFT calls")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument(
        "--levels",
        default=",".join(map(str, LEVELS)),
        help='runs started at once; "" for the time to first token alone',
    )
    parser.add_argument("--models", default=",".join(MODELS), help="immediate,delayed")
    parser.add_argument("--ttft-calls", type=int, default=None, help="per round, path and model")
    parser.add_argument("--seed", type=int, default=None, help="the shuffles' seed")
    parser.add_argument("--no-peer", action="store_true", help="skip LiteLLM even if installed")
    parser.add_argument("--json", help="also write the results there")
    parser.add_argument(
        "--compare",
        type=Path,
        action="append",
        default=[],
        help="another checkout (e.g. a worktree of main) served as one more column; repeatable",
    )
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else ROUNDS)
    calls = args.ttft_calls or (10 if args.quick else TTFT_CALLS)
    levels = tuple(int(x) for x in args.levels.split(",") if x)
    models = tuple(m for m in args.models.split(",") if m)
    unknown = set(models) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s) {sorted(unknown)}: choose from {list(MODELS)}")
    r = asyncio.run(_run(rounds, levels, calls, not args.no_peer, args.compare, models, args.seed))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    print_results(r, markdown=True)


if __name__ == "__main__":
    main()
