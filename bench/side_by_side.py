"""Quiver side by side with baselines and a peer, in one invocation (the issue #15 form).

Every gateway runs in its own process on 127.0.0.1, in front of one scripted LLM (its CLI,
`REPLY_WORDS` words, `TOKEN_DELAY_S` apart), driven by the same client (this process):
- B1: a minimal FastAPI relay of the model stream (`bench.baselines --mode b1`);
- B2: B1 + a batched asyncpg journal, every event stored before it is sent (`--mode b2`);
- Quiver: `quiver serve` on a throwaway Postgres database (`bench.servers.gateway`), at most
  30 database connections (`QUIVER_ENV`); `--compare PATH` adds another checkout's Quiver
  (e.g. a worktree of main) as one more column, measured the same way;
- LiteLLM: its proxy (`litellm --config …`), when installed: the executable named by
  `$QUIVER_BENCH_LITELLM`, else `litellm` on PATH (it is not a dependency of Quiver; install
  it into a separate venv and name its executable). Otherwise "not installed".

Measured, `ROUNDS` interleaved rounds (each round: every level, every gateway in turn, the
order rotated per round), medians over the rounds:
- gateway CPU per run: the gateway's utime+stime from /proc/<pid>/stat (its child processes
  included) over the level / completed runs;
- runs/s: completed runs / wall time of the level (all N runs started at once);
- first event p50: POST to the first SSE `data:` line (Quiver/B1/B2: `run_started`);
- time to first token at 1 concurrent (`TTFT_CALLS` sequential calls per path, interleaved):
  the first text chunk, direct to the scripted LLM vs through each gateway;
- errors: non-200 answers, transport errors, streams without their final event.

Targets (issue #15): CPU per run ≤ 1.5x B2 at 50 and at 200 concurrent; first-event p50 at 200
concurrent ≤ 2x B2's; TTFT at 1 concurrent ≤ direct + 5 ms; 0 errors.
Run: `python -m bench.side_by_side [--quick] [--rounds N] [--levels 50,200]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.common import percentile, print_table
from bench.servers import (
    ROOT,
    Llm,
    _stop,
    _wait_http,
    free_port,
    gateway,
    raise_fd_limit,
    scripted_llm,
)
from tests.fixtures.database import create_database, drop_database

ROUNDS = 3
LEVELS = (50, 200)
TTFT_CALLS = 30
WARMUP_RUNS = 10
TOKEN_DELAY_S = 0.02
REPLY_WORDS = 24
REPLY = " ".join(f"word{i}" for i in range(REPLY_WORDS))
MESSAGE = "Summarise the status of the deploy."
LEVEL_TIMEOUT_S = 300.0
QUIVER_ENV = {"QUIVER_DB_POOL_SIZE": "20", "QUIVER_DB_MAX_OVERFLOW": "10"}
"""At most 30 connections per Quiver: two of them plus B2 fit the shared server's default 100."""
LITELLM_ENV = "QUIVER_BENCH_LITELLM"
LITELLM_KEY = "sk-quiver-bench-0123456789abcdef0123456789abcdef"
TICKS = os.sysconf("SC_CLK_TCK")


# --- gateway processes -------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its live descendants (from /proc)."""
    total = 0.0
    todo = [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    todo.extend(int(c) for c in (task / "children").read_text().split())
    return total


@dataclass
class Target:
    name: str
    pid: int
    base_url: str
    path: str
    """The chat route; "/v1/chat/completions" speaks OpenAI (LiteLLM, direct)."""
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def openai(self) -> bool:
        return self.path.endswith("/chat/completions")


def openai_body() -> dict[str, Any]:
    return {"model": "bench", "messages": [{"role": "user", "content": MESSAGE}], "stream": True}


@contextlib.asynccontextmanager
async def baseline(mode: str, llm: Llm) -> AsyncIterator[Target]:
    db = await create_database("quiver_bench_b2") if mode == "b2" else None
    port = free_port()
    cmd = [sys.executable, "-m", "bench.baselines", "--mode", mode, "--port", str(port)]
    cmd += ["--llm", llm.base_url]
    if db:
        cmd += ["--dsn", f"postgresql://postgres@127.0.0.1:5432/{db}"]
    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up only, returns at once
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        base = f"http://127.0.0.1:{port}"
        await _wait_http(f"{base}/docs", proc)
        yield Target(mode.upper(), proc.pid, base, "/chat", body={"message": MESSAGE})
    finally:
        await asyncio.to_thread(_stop, proc)
        if db:
            await drop_database(db)


def litellm_executable() -> str | None:
    named = os.environ.get(LITELLM_ENV)
    if named:
        return named if Path(named).exists() else None
    return shutil.which("litellm")


@contextlib.asynccontextmanager
async def litellm(llm: Llm, exe: str) -> AsyncIterator[Target]:
    tmp = Path(tempfile.mkdtemp(prefix="quiver-bench-litellm-"))
    config = tmp / "config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: bench\n"
        "    litellm_params:\n"
        "      model: openai/bench\n"
        f"      api_base: {llm.base_url}\n"
        "      api_key: bench-key\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  drop_params: true\n"
    )
    port = free_port()
    cmd = [exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--num_workers", "1"]
    env = {
        "PATH": f"{Path(exe).parent}:/usr/bin:/bin",
        "HOME": str(tmp),
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_MODE": "PRODUCTION",
        "DISABLE_SCHEMA_UPDATE": "true",
        "LITELLM_MASTER_KEY": LITELLM_KEY,  # it refuses to start without one
    }
    log = (tmp / "litellm.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up only, returns at once
        cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        base = f"http://127.0.0.1:{port}"
        await _wait_http(f"{base}/health/liveliness", proc, timeout_s=240)
        yield Target(
            "LiteLLM",
            proc.pid,
            base,
            "/v1/chat/completions",
            headers={"Authorization": f"Bearer {LITELLM_KEY}"},
            body=openai_body(),
        )
    finally:
        await asyncio.to_thread(_stop, proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


# --- the client --------------------------------------------------------------------------


@dataclass
class Level:
    first_event: list[float] = field(default_factory=list)
    first_token: list[float] = field(default_factory=list)
    completed: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


async def one_run(client: httpx.AsyncClient, target: Target, out: Level) -> None:
    start = time.perf_counter()
    first_event = first_token = 0.0
    kind = ""
    finished = False
    try:
        url = f"{target.base_url}{target.path}"
        async with client.stream("POST", url, json=target.body, headers=target.headers) as response:
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
    if not finished:
        out.error(f"ended_{kind or 'early'}")
        return
    out.completed += 1
    out.first_event.append(first_event - start)
    out.first_token.append(first_token - start)


async def level(client: httpx.AsyncClient, target: Target, n: int) -> dict[str, Any]:
    out = Level()
    cpu = cpu_seconds(target.pid)
    start = time.perf_counter()
    tasks = [asyncio.create_task(one_run(client, target, out)) for _ in range(n)]
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
        "errors": sum(out.errors.values()),
        "error_kinds": out.errors,
    }


async def ttft(
    client: httpx.AsyncClient, targets: list[Target], calls: int
) -> dict[str, dict[str, float]]:
    """Sequential calls, one per path in turn: time to the first text chunk."""
    samples: dict[str, Level] = {t.name: Level() for t in targets}
    for i in range(calls + 3):
        for target in targets:
            sample = Level() if i < 3 else samples[target.name]
            await one_run(client, target, sample)
    return {
        name: {
            "ttft_p50_ms": 1000 * percentile(s.first_token, 50),
            "first_event_p50_ms": 1000 * percentile(s.first_event, 50),
            "errors": float(sum(s.errors.values())),
        }
        for name, s in samples.items()
    }


# --- the invocation ------------------------------------------------------------------------


async def _warm(client: httpx.AsyncClient, target: Target) -> None:
    out = Level()
    for _ in range(WARMUP_RUNS):
        await one_run(client, target, out)
    if out.errors:
        raise RuntimeError(f"{target.name}: warm-up runs failed: {out.errors}")


async def _quiver(
    stack: contextlib.AsyncExitStack, llm: Llm, name: str, root: Path | None = None
) -> Target:
    gw = await stack.enter_async_context(
        gateway(llm.base_url, database="postgres", root=root, extra_env=QUIVER_ENV)
    )
    agent_id = await gw.create_agent()
    return Target(
        name,
        gw.proc.pid,
        gw.base_url,
        "/api/v1/chat",
        headers=dict(gw.client().headers),
        body={"agent_id": agent_id, "message": MESSAGE},
    )


async def _run(
    rounds: int,
    levels: tuple[int, ...],
    calls: int,
    peer: bool,
    compare: Path | None = None,
) -> dict[str, Any]:
    raise_fd_limit()
    exe = litellm_executable() if peer else None
    out: dict[str, Any] = {
        "rounds": rounds,
        "levels": list(levels),
        "token_delay_ms": TOKEN_DELAY_S * 1000,
        "reply_words": REPLY_WORDS,
        "litellm": exe or "not installed",
    }
    async with contextlib.AsyncExitStack() as stack:
        llm = await stack.enter_async_context(
            scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY)
        )
        targets = [
            await stack.enter_async_context(baseline("b1", llm)),
            await stack.enter_async_context(baseline("b2", llm)),
        ]
        targets.append(await _quiver(stack, llm, "Quiver"))
        if compare is not None:
            targets.append(await _quiver(stack, llm, f"Quiver@{compare.name}", compare))
        if exe:
            targets.append(await stack.enter_async_context(litellm(llm, exe)))
        limits = httpx.Limits(max_connections=max(levels) + 50, max_keepalive_connections=50)
        client = await stack.enter_async_context(
            httpx.AsyncClient(timeout=httpx.Timeout(120.0, pool=120.0), limits=limits)
        )
        for target in targets:
            await _warm(client, target)
        runs: dict[str, dict[int, list[dict[str, Any]]]] = {
            t.name: {n: [] for n in levels} for t in targets
        }
        for r in range(rounds):
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for n in levels:
                for target in order:
                    await asyncio.sleep(0.5)  # let the previous level's connections settle
                    runs[target.name][n].append(await level(client, target, n))
        direct = Target("direct", llm.proc.pid, llm.base_url, "/chat/completions")
        direct.body = openai_body()
        out["ttft"] = await ttft(client, [direct, *targets], calls)
    out["levels_raw"] = runs
    out["gateways"] = {
        name: {str(n): _median(samples) for n, samples in by_level.items()}
        for name, by_level in runs.items()
    }
    out["targets"] = targets_met(out)
    return out


def _median(samples: list[dict[str, Any]]) -> dict[str, float]:
    keys = ("cpu_ms_per_run", "runs_per_s", "first_event_p50_ms")
    summary = {k: statistics.median(s[k] for s in samples) for k in keys}
    summary["errors"] = float(sum(s["errors"] for s in samples))
    return summary


def targets_met(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #15's targets as rows: (what, Quiver's value, the bound, pass/fail)."""
    g, t = r["gateways"], r["ttft"]
    rows: list[dict[str, Any]] = []
    for n in r["levels"]:
        q, b2 = g["Quiver"][str(n)], g["B2"][str(n)]
        ratio = q["cpu_ms_per_run"] / b2["cpu_ms_per_run"] if b2["cpu_ms_per_run"] else 0.0
        rows.append(
            {
                "target": f"gateway CPU per run at {n} concurrent ≤ 1.5x B2",
                "value": f"{ratio:.2f}x ({q['cpu_ms_per_run']:.1f} vs "
                f"{b2['cpu_ms_per_run']:.1f} ms)",
                "pass": ratio <= 1.5,
            }
        )
    top = str(max(r["levels"]))
    q, b2 = g["Quiver"][top], g["B2"][top]
    ratio = q["first_event_p50_ms"] / b2["first_event_p50_ms"] if b2["first_event_p50_ms"] else 0.0
    rows.append(
        {
            "target": f"first-event p50 at {top} concurrent ≤ 2x B2",
            "value": f"{ratio:.2f}x ({q['first_event_p50_ms']:.0f} vs "
            f"{b2['first_event_p50_ms']:.0f} ms)",
            "pass": ratio <= 2.0,
        }
    )
    added = t["Quiver"]["ttft_p50_ms"] - t["direct"]["ttft_p50_ms"]
    rows.append(
        {
            "target": "time to first token at 1 concurrent ≤ direct + 5 ms",
            "value": f"+{added:.1f} ms ({t['Quiver']['ttft_p50_ms']:.1f} vs "
            f"{t['direct']['ttft_p50_ms']:.1f} ms)",
            "pass": added <= 5.0,
        }
    )
    errors = sum(v["errors"] for v in g["Quiver"].values()) + t["Quiver"]["errors"]
    rows.append({"target": "0 errors (Quiver)", "value": f"{errors:.0f}", "pass": errors == 0})
    return rows


def run(quick: bool = False, peer: bool = True) -> dict[str, Any]:
    rounds = 1 if quick else ROUNDS
    calls = 10 if quick else TTFT_CALLS
    return asyncio.run(_run(rounds, LEVELS, calls, peer))


def table(r: dict[str, Any]) -> list[list[Any]]:
    """The side-by-side table: one row per metric, one column per gateway (medians)."""
    names = list(r["gateways"])
    g, t = r["gateways"], r["ttft"]
    rows: list[list[Any]] = []

    def ratio(value: float, base: float) -> str:
        return f" ({value / base:.2f}x)" if base else ""

    for n in r["levels"]:
        key = str(n)
        b2 = g["B2"][key]
        rows.append(
            [f"gateway CPU per run, {n} concurrent (ms)"]
            + [
                f"{g[x][key]['cpu_ms_per_run']:.1f}"
                + ratio(g[x][key]["cpu_ms_per_run"], b2["cpu_ms_per_run"])
                for x in names
            ]
        )
    for n in r["levels"]:
        key = str(n)
        rows.append([f"runs/s, {n} concurrent"] + [f"{g[x][key]['runs_per_s']:.0f}" for x in names])
    for n in r["levels"]:
        key = str(n)
        b2 = g["B2"][key]
        rows.append(
            [f"first event p50, {n} concurrent (ms)"]
            + [
                f"{g[x][key]['first_event_p50_ms']:.0f}"
                + ratio(g[x][key]["first_event_p50_ms"], b2["first_event_p50_ms"])
                for x in names
            ]
        )
    rows.append(
        [f"time to first token, 1 concurrent (ms; direct {t['direct']['ttft_p50_ms']:.1f})"]
        + [f"{t[x]['ttft_p50_ms']:.1f}" for x in names]
    )
    rows.append(
        ["errors"]
        + [f"{sum(v['errors'] for v in g[x].values()) + t[x]['errors']:.0f}" for x in names]
    )
    return rows


def print_results(r: dict[str, Any]) -> None:
    names = list(r["gateways"])
    print(
        f"{r['rounds']} interleaved round(s), medians; {r['reply_words']} words "
        f"{r['token_delay_ms']:.0f} ms apart; LiteLLM: {r['litellm']}"
    )
    print_table(table(r), ["per run", *names])
    print()
    print_table(
        [[row["target"], row["value"], "pass" if row["pass"] else "FAIL"] for row in r["targets"]],
        ["target", "Quiver", "status"],
    )


def markdown(r: dict[str, Any]) -> str:
    names = list(r["gateways"])
    lines = ["| per run, medians | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---:|" * len(names))
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table(r)]
    lines += ["", "| target | Quiver | status |", "|---|---|---|"]
    lines += [
        f"| {row['target']} | {row['value']} | {'pass' if row['pass'] else 'FAIL'} |"
        for row in r["targets"]
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, 10 TTFT calls")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--levels", default=",".join(map(str, LEVELS)))
    parser.add_argument("--ttft-calls", type=int, default=None)
    parser.add_argument("--no-peer", action="store_true", help="skip LiteLLM even if installed")
    parser.add_argument("--json", help="also write the results there")
    parser.add_argument(
        "--compare",
        type=Path,
        help="another checkout (e.g. a worktree of main) served as one more column",
    )
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else ROUNDS)
    calls = args.ttft_calls or (10 if args.quick else TTFT_CALLS)
    levels = tuple(int(x) for x in args.levels.split(",") if x)
    r = asyncio.run(_run(rounds, levels, calls, not args.no_peer, args.compare))
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    print_results(r)
    print()
    print(markdown(r))


if __name__ == "__main__":
    main()
