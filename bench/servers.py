"""Real processes for the end-to-end benchmarks: the scripted LLM and a Quiver gateway.

Both run as subprocesses on 127.0.0.1 so they do not share the benchmark client's CPU or
event loop: the scripted LLM through its CLI (`python -m tests.fixtures.scripted_llm`), the
gateway through `quiver serve` (migrations, then uvicorn) on a throwaway database:
Postgres (a fresh database on 127.0.0.1:5432, dropped afterwards) or a SQLite file in a
temporary directory. `rss_bytes()` reads the gateway's resident set from /proc.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from cryptography.fernet import Fernet

from tests.fixtures.database import create_database, drop_database

ADMIN_TOKEN = "qv_bench_admin_token_0123456789"
ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def raise_fd_limit(wanted: int = 65536) -> int:
    """Raise RLIMIT_NOFILE toward `wanted` (children inherit it); returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(wanted, hard) if hard != resource.RLIM_INFINITY else wanted
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return max(soft, target)


def rss_bytes(pid: int) -> int:
    """Resident set size of a process (VmRSS from /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _stop(proc: subprocess.Popen[bytes], interrupt: bool = False) -> None:
    if proc.poll() is None:
        if interrupt:  # a graceful exit lets a profiler write its report
            proc.send_signal(signal.SIGINT)
        else:
            proc.terminate()
        try:
            proc.wait(timeout=120 if interrupt else 15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


async def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"process exited with {proc.returncode} during start-up")
            with contextlib.suppress(httpx.HTTPError):
                await client.get(url)
                return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout_s} s")


@dataclass
class Llm:
    proc: subprocess.Popen[bytes]
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextlib.asynccontextmanager
async def scripted_llm(
    *,
    token_delay_s: float,
    reply: str,
    port: int | None = None,
    immediate_models: tuple[str, ...] = (),
) -> AsyncIterator[Llm]:
    """The scripted OpenAI-compatible server in its own process (its CLI); requests naming one
    of `immediate_models` get their first text chunk at once (`--immediate-model`)."""
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "tests.fixtures.scripted_llm",
        "--port",
        str(port),
        "--token-delay",
        str(token_delay_s),
        "--reply",
        reply,
    ]
    for model in immediate_models:
        cmd += ["--immediate-model", model]
    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up only, returns at once
        cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        await _wait_http(f"http://127.0.0.1:{port}/", proc)  # any answer (404) means it listens
        yield Llm(proc=proc, port=port)
    finally:
        await asyncio.to_thread(_stop, proc)


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    base_url: str
    database: str
    """"postgres" or "sqlite"."""
    database_url: str = ""
    """The throwaway Postgres database's URL ("" on SQLite)."""

    def rss(self) -> int:
        return rss_bytes(self.proc.pid)

    def client(self, *, connections: int = 20, timeout_s: float = 120.0) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=httpx.Timeout(timeout_s, pool=timeout_s),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    async def create_agent(self, name: str = "bench") -> str:
        body = {"name": name, "instructions": "You are the benchmark agent. Answer briefly."}
        async with self.client() as client:
            response = await client.post("/api/v1/agents", json=body)
            response.raise_for_status()
            return str(response.json()["id"])


async def _postgres_up() -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", 5432), 1.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    await writer.wait_closed()
    return True


@contextlib.asynccontextmanager
async def gateway(
    llm_base_url: str,
    *,
    database: str = "auto",
    profile_to: Path | None = None,
    extra_env: dict[str, str] | None = None,
    root: Path | None = None,
    workers: int = 1,
    database_url: str | None = None,
) -> AsyncIterator[Gateway]:
    """`quiver serve` in a subprocess on a throwaway database (dropped/removed afterwards).

    `database_url`: serve this Postgres database instead, and keep it (a restart on the same
    data; pass the same `QUIVER_SECRET_KEYS` in `extra_env`).
    `profile_to`: run it under pyinstrument and write a text report there on exit.
    `root`: the checkout whose `app` package is served (default: this one), e.g. another
    git worktree to compare two versions in one invocation.
    `workers`: `quiver serve --workers N` (Postgres only); up once all N workers beat.
    """
    if workers > 1:
        database = "postgres"
    if database == "auto":
        database = "postgres" if await _postgres_up() else "sqlite"
    tmp = Path(tempfile.mkdtemp(prefix="quiver-bench-"))
    if database_url:
        database = "postgres"
    throwaway = database == "postgres" and not database_url
    db_name = await create_database("quiver_bench") if throwaway else None
    url = f"postgresql://postgres@127.0.0.1:5432/{db_name}" if db_name else database_url or ""
    port = free_port()
    env = {
        "PATH": "/usr/bin:/bin",
        "QUIVER_DATA_DIR": str(tmp),
        "QUIVER_DATABASE_URL": url,
        "QUIVER_ADMIN_TOKEN": ADMIN_TOKEN,
        "QUIVER_SECRET_KEYS": Fernet.generate_key().decode(),
        "QUIVER_LLM_BASE_URL": llm_base_url,
        "QUIVER_LLM_API_KEY": "bench-key",
        "QUIVER_LOG_LEVEL": "WARNING",
        "QUIVER_SSE_PING_S": "15",
        **(extra_env or {}),
    }
    cmd = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    if profile_to is not None:
        cmd = [sys.executable, "-m", "bench.servers", str(profile_to), str(port)]
    log = (tmp / "gateway.log").open("wb")
    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up only, returns at once
        cmd, cwd=root or ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        base = f"http://127.0.0.1:{port}"
        await _wait_http(f"{base}/healthz", proc, timeout_s=180 if workers > 1 else 60)
        if workers > 1:
            await _until_workers_beat(url, workers)
        yield Gateway(proc=proc, base_url=base, database=database, database_url=url)
    finally:
        await asyncio.to_thread(_stop, proc, profile_to is not None)
        log.close()
        if db_name:
            await drop_database(db_name)
        shutil.rmtree(tmp, ignore_errors=True)


async def _until_workers_beat(url: str, workers: int, limit_s: float = 180) -> None:
    conn = await asyncpg.connect(url)
    try:
        deadline = time.monotonic() + limit_s
        while await conn.fetchval("SELECT count(*) FROM workers") < workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{workers} workers did not start within {limit_s:g} s")
            await asyncio.sleep(0.2)
    finally:
        await conn.close()


def _serve_profiled(out: str, port: int) -> None:
    """`quiver serve`, with pyinstrument sampling only while requests are served."""
    import uvicorn
    from pyinstrument import Profiler

    from app.config import load_settings
    from app.db.migrate import upgrade
    from app.main import create_app
    from app.ops.logging import configure_logging

    settings = load_settings()
    configure_logging(settings.log_level)
    upgrade(settings)
    app = create_app(settings)
    profiler = Profiler(interval=0.001, async_mode="disabled")

    async def profiled(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not profiler.is_running:
            profiler.start()  # from the first request on: start-up is not the subject
        await app(scope, receive, send)

    try:
        uvicorn.run(profiled, host="127.0.0.1", port=port, log_config=None)
    finally:
        if profiler.is_running:
            profiler.stop()
        Path(out).write_text(profiler.output_text(unicode=True, color=False))


if __name__ == "__main__":
    _serve_profiled(sys.argv[1], int(sys.argv[2]))
