"""LlmClient overhead vs raw streaming against the scripted OpenAI-compatible server.

Measures time-to-first-token (first text delta), total time and this process's CPU per call,
p50/p95 over N calls, the paths interleaved call by call:
- `raw_aiohttp`: aiohttp reading the SSE lines itself (the floor of the client's transport);
- `raw_httpx`: httpx with its default transport (httpcore, h11) reading them itself;
- `llm_client`: `LlmClient` on its own session (`app/llm/transport.py`: aiohttp's client);
- `llm_client_3_tool_calls`: the same, a reply of three tool calls.
Run: `.venv/bin/python -m bench.llm_stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import aiohttp
import httpx

from app.llm.client import LlmClient
from app.llm.types import ChatMessage, TextDelta
from bench.common import percentile, print_table

CALLS = 200
WARMUP = 10
TEXT = " ".join(f"word{i}" for i in range(50))
MESSAGES = [ChatMessage.system("You are a benchmark."), ChatMessage.user("Say fifty words.")]

Timing = tuple[float, float, float]
"""(seconds to first text delta or nan, seconds to the end, CPU seconds of this process)."""


async def via_client(client: LlmClient) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    first = float("nan")
    async for item in client.stream_chat(MESSAGES, tools=None):
        if isinstance(item, TextDelta) and first != first:
            first = time.perf_counter() - start
    return first, time.perf_counter() - start, time.process_time() - cpu


BODY = {
    "model": "bench",
    "messages": [m.to_openai() for m in MESSAGES],
    "stream": True,
    "stream_options": {"include_usage": True},
}


def _first_text(line: str) -> bool:
    if not line.startswith("data: ") or line == "data: [DONE]":
        return False
    choices = json.loads(line[6:])["choices"]
    return bool(choices and choices[0]["delta"].get("content"))


async def via_aiohttp(session: aiohttp.ClientSession, url: str) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    first = float("nan")
    async with session.post(url, json=BODY) as response:
        async for raw in response.content:
            if _first_text(raw.decode().rstrip("\r\n")) and first != first:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start, time.process_time() - cpu


async def via_raw(http: httpx.AsyncClient, url: str) -> Timing:
    start, cpu = time.perf_counter(), time.process_time()
    first = float("nan")
    async with http.stream("POST", url, json=BODY) as response:
        async for line in response.aiter_lines():
            if _first_text(line) and first != first:
                first = time.perf_counter() - start
    return first, time.perf_counter() - start, time.process_time() - cpu


async def measure(
    paths: dict[str, Callable[[], Awaitable[Timing]]], calls: int
) -> dict[str, dict[str, float | None]]:
    """Interleave the paths call by call so machine load drifts hit them equally."""
    timings: dict[str, list[Timing]] = {name: [] for name in paths}
    for i in range(WARMUP + calls):
        for name, call in paths.items():
            timing = await call()
            if i >= WARMUP:
                timings[name].append(timing)
    return {name: _summary(values) for name, values in timings.items()}


def _summary(timings: list[Timing]) -> dict[str, float | None]:
    ttft = [t[0] * 1000 for t in timings if t[0] == t[0]]
    total = [t[1] * 1000 for t in timings]
    return {
        "ttft_p50_ms": percentile(ttft, 50) if ttft else None,
        "ttft_p95_ms": percentile(ttft, 95) if ttft else None,
        "total_p50_ms": percentile(total, 50),
        "total_p95_ms": percentile(total, 95),
        "cpu_p50_ms": percentile([t[2] * 1000 for t in timings], 50),
    }


@contextlib.contextmanager
def cli_server(*args: str) -> Iterator[str]:
    """The scripted server in its own process (no GIL sharing with the client); yields base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "tests.fixtures.scripted_llm", "--port", str(port), *args]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # "listening on ..." once the socket accepts
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=10)


def _client(base_url: str) -> LlmClient:
    return LlmClient(base_url=base_url, api_key="bench", model="bench", timeout_s=30, max_retries=0)


async def _run(calls: int) -> dict[str, Any]:
    results: dict[str, Any] = {"calls": calls}
    async with httpx.AsyncClient() as http, aiohttp.ClientSession() as session:
        with cli_server("--reply", TEXT) as base_url:
            url = f"{base_url}/chat/completions"
            own = _client(base_url)
            results.update(
                await measure(
                    {
                        "raw_aiohttp": lambda: via_aiohttp(session, url),
                        "raw_httpx": lambda: via_raw(http, url),
                        "llm_client": lambda: via_client(own),
                    },
                    calls,
                )
            )
            await own.aclose()
        with cli_server("--tool-calls", "3") as base_url:
            own = _client(base_url)
            results.update(
                await measure({"llm_client_3_tool_calls": lambda: via_client(own)}, calls)
            )
            await own.aclose()
    raw, ours = results["raw_aiohttp"], results["llm_client"]
    results["overhead_total_p50_ms"] = ours["total_p50_ms"] - raw["total_p50_ms"]
    results["overhead_ttft_p50_ms"] = ours["ttft_p50_ms"] - raw["ttft_p50_ms"]
    results["overhead_cpu_p50_ms"] = ours["cpu_p50_ms"] - raw["cpu_p50_ms"]
    return results


def run(calls: int = CALLS) -> dict[str, Any]:
    """Benchmark entry point for the harness: nested dict of milliseconds."""
    results = asyncio.run(_run(calls))
    rows = [
        [
            name,
            *(
                results[name][k]
                for k in (
                    "ttft_p50_ms",
                    "ttft_p95_ms",
                    "total_p50_ms",
                    "total_p95_ms",
                    "cpu_p50_ms",
                )
            ),
        ]
        for name in (
            "raw_aiohttp",
            "raw_httpx",
            "llm_client",
            "llm_client_3_tool_calls",
        )
    ]
    print(
        f"LLM streaming, {calls} calls each, 50-token reply / 3 tool calls "
        "(scripted server in a subprocess, 127.0.0.1)"
    )
    print_table(
        rows, ["path", "ttft p50 ms", "ttft p95 ms", "total p50 ms", "total p95 ms", "cpu p50 ms"]
    )
    print(
        "LlmClient overhead over raw aiohttp, p50: "
        f"ttft {results['overhead_ttft_p50_ms']:+.3f} ms, "
        f"total {results['overhead_total_p50_ms']:+.3f} ms, "
        f"CPU {results['overhead_cpu_p50_ms']:+.3f} ms per call"
    )
    return results


if __name__ == "__main__":
    run()
