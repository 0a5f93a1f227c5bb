"""Other MCP gateways in front of the same upstream, for `bench.mcp_calls`.

Each peer lives in a venv of its own under the bench's cache (`$QUIVER_BENCH_CACHE`, default
`~/.cache/quiver-bench`, then `peers/<name>`), created on first use with `python -m venv` and
pip: they pin other versions of `mcp` (and more) than Quiver does, so they never share its venv.
A peer that cannot be installed (no network, a failed build) is reported with pip's last words
and left out; the bench goes on without it.

Every peer runs as its own process on 127.0.0.1 (its CPU is read from /proc like Quiver's) and
serves MCP streamable HTTP:
- FastMCP's proxy (`bench/peer_scripts/fastmcp_proxy.py`): `create_proxy` around one connected
  stdio client of the upstream;
- mcp-proxy: its CLI, `mcp-proxy --port N <stdio command>` (one stdio session, `/mcp`);
- LiteLLM's MCP gateway: `litellm --config` with the upstream as an MCP server over streamable
  HTTP (a bare SDK server of `bench.mcp_floor`, in its own process, not counted as LiteLLM's CPU),
  served at `/mcp/` with the master key.
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

from bench.mcp_floor import floor
from bench.servers import _stop, _wait_http, free_port

CACHE_ENV = "QUIVER_BENCH_CACHE"
INSTALL_TIMEOUT_S = 1200
SCRIPTS = Path(__file__).resolve().parent / "peer_scripts"
LITELLM_KEY = "sk-quiver-bench-0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Peer:
    name: str
    requirement: str
    label: str


PEERS = (
    Peer("fastmcp", "fastmcp==4.1.6", "FastMCP 4.1.6 proxy"),
    Peer("mcp-proxy", "mcp-proxy==0.13.0", "mcp-proxy 0.13.0"),
    Peer("litellm", "litellm[proxy]==1.108.7", "LiteLLM 1.108.7 MCP gateway (HTTP upstream)"),
)


@dataclass
class Served:
    """A running MCP server the bench calls: its process and its streamable-HTTP URL."""

    proc: subprocess.Popen[bytes]
    url: str
    headers: dict[str, str] = field(default_factory=dict)


def cache_dir() -> Path:
    named = os.environ.get(CACHE_ENV)
    return Path(named) if named else Path.home() / ".cache" / "quiver-bench"


def ensure_venv(peer: Peer) -> Path | str:
    """The peer's venv (created and installed on first use), or why it cannot be had."""
    root = cache_dir() / "peers" / peer.name
    marker = root / ".installed"
    if marker.exists() and marker.read_text() == peer.requirement:
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.parent.mkdir(parents=True, exist_ok=True)
    print(f"bench: installing {peer.requirement} into {root} (once)", flush=True)
    steps = (
        [sys.executable, "-m", "venv", str(root)],
        [str(root / "bin" / "python"), "-m", "pip", "install", "-q", peer.requirement],
    )
    for step in steps:
        try:
            done = subprocess.run(
                step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot be installed: {type(exc).__name__}: {exc}"
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            errors = [ln for ln in lines if "ERROR" in ln] or lines
            return f"cannot be installed: {(errors[-1] if errors else 'pip failed')[:300]}"
    marker.write_text(peer.requirement)
    return root


def _spawn(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    log = (cwd / "peer.log").open("wb")
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)


def _last_log(cwd: Path) -> str:
    with contextlib.suppress(OSError):
        lines = (cwd / "peer.log").read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-3:])[:400]
    return ""


@contextlib.asynccontextmanager
async def serve_peer(peer: Peer, venv: Path, command: str) -> AsyncIterator[Served]:
    """The peer in its own process, proxying the stdio MCP server `command`."""
    tmp = Path(tempfile.mkdtemp(prefix=f"quiver-bench-{peer.name}-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with contextlib.AsyncExitStack() as stack:
        headers: dict[str, str] = {}
        if peer.name == "fastmcp":
            script = str(SCRIPTS / "fastmcp_proxy.py")
            proc = _spawn([str(venv / "bin" / "python"), script, "--port", str(port), command], tmp)
            url, ready, wait_s = f"{base}/mcp", f"{base}/mcp", 60.0
        elif peer.name == "mcp-proxy":
            cmd = [str(venv / "bin" / "mcp-proxy"), "--port", str(port), "--host", "127.0.0.1"]
            proc = _spawn([*cmd, "--log-level", "WARNING", command], tmp)
            url, ready, wait_s = f"{base}/mcp", f"{base}/mcp", 60.0
        else:
            upstream = await stack.enter_async_context(floor(command))
            proc = _spawn(*_litellm(venv, tmp, port, upstream.url))
            url, ready, wait_s = f"{base}/mcp/", f"{base}/health/liveliness", 240.0
            headers = {"x-litellm-api-key": f"Bearer {LITELLM_KEY}"}
        try:
            await _wait_http(ready, proc, timeout_s=wait_s)
        except RuntimeError as exc:
            await asyncio.to_thread(_stop, proc)
            raise RuntimeError(f"{peer.label}: {exc}: {_last_log(tmp)}") from exc
        try:
            yield Served(proc=proc, url=url, headers=headers)
        finally:
            await asyncio.to_thread(_stop, proc)
            shutil.rmtree(tmp, ignore_errors=True)


def _litellm(
    venv: Path, tmp: Path, port: int, upstream_url: str
) -> tuple[list[str], Path, dict[str, str]]:
    config = tmp / "config.yaml"
    config.write_text(
        "model_list: []\n"
        "mcp_servers:\n"
        "  clock:\n"
        f"    url: {upstream_url}\n"
        "    transport: http\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
    )
    cmd = [str(venv / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--num_workers", "1"]
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp),
        "LITELLM_LOG": "ERROR",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_MODE": "PRODUCTION",
        "DISABLE_SCHEMA_UPDATE": "true",
        "LITELLM_MASTER_KEY": LITELLM_KEY,
    }
    return cmd, tmp, env
