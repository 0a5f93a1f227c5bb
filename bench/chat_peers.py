"""The chat paths `bench.side_by_side` drives, each in its own process on 127.0.0.1.

- direct: the scripted model itself (`tests/fixtures/scripted_llm.py`, its CLI);
- B1: a minimal FastAPI relay of the model stream (`bench.baselines --mode b1`);
- B2: B1 + a batched asyncpg journal, every event stored before it is sent (`--mode b2`);
- Quiver: `quiver serve` on a throwaway Postgres database (`bench.servers.gateway`), at most
  30 database connections (`QUIVER_ENV`), one agent per model;
- LiteLLM: its proxy (`litellm --config …`) when installed: the executable named by
  `$QUIVER_BENCH_LITELLM`, else `litellm` on PATH (not a dependency of Quiver).

Every path serves each model of `MODELS`: the scripted model's first text chunk comes at
once for one (`--immediate-model`), `TOKEN_DELAY_S` after its first chunk for the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.servers import ROOT, Llm, _stop, _wait_http, free_port, gateway
from tests.fixtures.database import create_database, drop_database

MODELS = {"immediate": "bench-immediate", "delayed": "bench"}
"""Model variant → the model name sent to the scripted model (the first one answers at once)."""
TOKEN_DELAY_S = 0.02
REPLY_WORDS = 24
REPLY = " ".join(f"word{i}" for i in range(REPLY_WORDS))
MESSAGE = "Summarise the status of the deploy."
QUIVER_ENV = {"QUIVER_DB_POOL_SIZE": "20", "QUIVER_DB_MAX_OVERFLOW": "10"}
"""At most 30 connections per Quiver: two of them plus B2 fit the shared server's default 100."""
LITELLM_ENV = "QUIVER_BENCH_LITELLM"
LITELLM_KEY = "sk-quiver-bench-0123456789abcdef0123456789abcdef"
TICKS = os.sysconf("SC_CLK_TCK")


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
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Model variant (`MODELS`) → the request body."""

    @property
    def openai(self) -> bool:
        return self.path.endswith("/chat/completions")

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.path}"


def openai_body(model: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": MESSAGE}], "stream": True}


def direct(llm: Llm) -> Target:
    bodies = {variant: openai_body(name) for variant, name in MODELS.items()}
    return Target("direct", llm.proc.pid, llm.base_url, "/chat/completions", bodies=bodies)


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
        bodies = {v: {"message": MESSAGE, "model": name} for v, name in MODELS.items()}
        yield Target(mode.upper(), proc.pid, base, "/chat", bodies=bodies)
    finally:
        await asyncio.to_thread(_stop, proc)
        if db:
            await drop_database(db)


async def quiver(
    stack: contextlib.AsyncExitStack, llm: Llm, name: str, root: Path | None = None
) -> Target:
    """A `quiver serve` (of the checkout `root`, default this one) with one agent per model."""
    gw = await stack.enter_async_context(
        gateway(llm.base_url, database="postgres", root=root, extra_env=QUIVER_ENV)
    )
    bodies: dict[str, dict[str, Any]] = {}
    async with gw.client() as client:
        for variant, model in MODELS.items():
            body = {
                "name": f"bench-{variant}",
                "instructions": "You are the benchmark agent. Answer briefly.",
                "model": model,
            }
            response = await client.post("/api/v1/agents", json=body)
            response.raise_for_status()
            bodies[variant] = {"agent_id": response.json()["id"], "message": MESSAGE}
    headers = dict(gw.client().headers)
    return Target(name, gw.proc.pid, gw.base_url, "/api/v1/chat", headers=headers, bodies=bodies)


def litellm_executable() -> str | None:
    named = os.environ.get(LITELLM_ENV)
    if named:
        return named if Path(named).exists() else None
    return shutil.which("litellm")


@contextlib.asynccontextmanager
async def litellm(llm: Llm, exe: str) -> AsyncIterator[Target]:
    tmp = Path(tempfile.mkdtemp(prefix="quiver-bench-litellm-"))
    config = tmp / "config.yaml"
    models = "".join(
        f"  - model_name: {name}\n"
        "    litellm_params:\n"
        f"      model: openai/{name}\n"
        f"      api_base: {llm.base_url}\n"
        "      api_key: bench-key\n"
        for name in MODELS.values()
    )
    config.write_text(
        f"model_list:\n{models}litellm_settings:\n  telemetry: false\n  drop_params: true\n"
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
            bodies={variant: openai_body(name) for variant, name in MODELS.items()},
        )
    finally:
        await asyncio.to_thread(_stop, proc)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
