"""What the gateway adds in front of the model: first event, first token, meta-tool dispatch.

Streaming: the scripted LLM runs in its own process (its CLI, `--token-delay` between chunks),
Quiver in another (`quiver serve`, throwaway Postgres DB, or SQLite when Postgres is absent).
The same client, sequentially, `ROUNDS` times each:
- direct: POST {llm}/chat/completions (stream). First event = first `data:` line, first
  token = first chunk with non-empty `delta.content`.
- gateway: POST /api/v1/chat (SSE). First event = `run_started`, first token = first
  `model_delta`. Before the model is called the gateway stores the conversation and the run,
  assembles the toolset and journals `run_started`; every event is journaled before it is sent.
Added = gateway p50 - direct p50 (target: first token ≤ 5 ms p50 added).

Dispatch (in process): `AssembledToolset.call` on the reference catalog (bench.pipeline, scale
1) for `read_skill` and `connector discover` (in memory: the whole time is dispatch +
rendering), and `connector execute` against an instant back-end (time minus the back-end's).
Run: `.venv/bin/python -m bench.chat_overhead [--rounds N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import httpx

from bench.common import percentile, print_table
from bench.servers import Gateway, gateway, scripted_llm

ROUNDS = 60
WARMUP = 5
TOKEN_DELAY_S = 0.02
REPLY = "The deploy failed because the migration timed out; retry after the lock clears."
MESSAGE = "Why did the deploy fail?"


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": percentile(values, 50), "p99_ms": percentile(values, 99)}


async def _direct_once(client: httpx.AsyncClient, url: str) -> tuple[float, float, float]:
    body = {
        "model": "bench",
        "messages": [
            {"role": "system", "content": "You are the benchmark agent."},
            {"role": "user", "content": MESSAGE},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    start = time.perf_counter()
    first_event = first_token = 0.0
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            now = time.perf_counter()
            first_event = first_event or now
            data = line[5:].strip()
            if not first_token and data != "[DONE]":
                choices = json.loads(data).get("choices") or [{}]
                if (choices[0].get("delta") or {}).get("content"):
                    first_token = now
    end = time.perf_counter()
    return first_event - start, first_token - start, end - start


async def _gateway_once(client: httpx.AsyncClient, agent_id: str) -> tuple[float, float, float]:
    start = time.perf_counter()
    first_event = first_token = 0.0
    last = ""
    body = {"agent_id": agent_id, "message": MESSAGE}
    async with client.stream("POST", "/api/v1/chat", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("event:"):
                continue
            now = time.perf_counter()
            last = line[6:].strip()
            first_event = first_event or now
            if not first_token and last == "model_delta":
                first_token = now
    if last != "run_finished":
        raise RuntimeError(f"run ended with {last!r}")
    end = time.perf_counter()
    return first_event - start, first_token - start, end - start


async def _streaming(rounds: int, database: str) -> dict[str, Any]:
    async with (
        scripted_llm(token_delay_s=TOKEN_DELAY_S, reply=REPLY) as llm,
        gateway(llm.base_url, database=database) as gw,
    ):
        agent_id = await gw.create_agent()
        direct: list[tuple[float, float, float]] = []
        via: list[tuple[float, float, float]] = []
        async with httpx.AsyncClient(timeout=30) as plain, gw.client() as client:
            for i in range(WARMUP + rounds):
                # interleave so drift on a shared machine hits both sides alike
                d = await _direct_once(plain, llm.base_url)
                g = await _gateway_once(client, agent_id)
                if i >= WARMUP:
                    direct.append(d)
                    via.append(g)
        return _compare(direct, via, gw)


def _compare(
    direct: list[tuple[float, float, float]], via: list[tuple[float, float, float]], gw: Gateway
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "database": gw.database,
        "rounds": len(direct),
        "token_delay_ms": TOKEN_DELAY_S * 1000,
    }
    for idx, name in enumerate(("first_event", "first_token", "total")):
        d = [x[idx] * 1000 for x in direct]
        g = [x[idx] * 1000 for x in via]
        out[f"direct_{name}"] = _summary(d)
        out[f"gateway_{name}"] = _summary(g)
        out[f"added_{name}_p50_ms"] = percentile(g, 50) - percentile(d, 50)
        out[f"added_{name}_p99_ms"] = percentile(g, 99) - percentile(d, 99)
    return out


# --- meta-tool dispatch (in process) --------------------------------------------------------


class _Instant:
    """A back-end that answers at once: what remains is the dispatch path's own cost."""

    async def execute(self, *args: Any) -> Any:
        from app.tools.base import ToolResult

        return ToolResult.success('{"ok": true}')

    query = call = execute

    async def recall(self, **kwargs: Any) -> Any:
        return await self.execute()


async def _time(fn: Any, n: int) -> list[float]:
    for _ in range(20):
        await fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


async def _dispatch(n: int) -> dict[str, Any]:
    from app.config import Settings
    from app.pipeline.assemble import assemble_toolset
    from app.pipeline.sources.backends import Backends
    from app.tools.base import CallContext
    from bench.pipeline import QUERY, build_agent, github_tools, skill_content

    settings = Settings()
    instant = _Instant()
    agent = build_agent(1, github_tools(), [skill_content(i) for i in range(10)])
    ctx = CallContext(run_id="bench", agent_id="bench")
    out: dict[str, Any] = {}
    async with httpx.AsyncClient() as http:
        backends = Backends(
            settings=settings,
            http=http,
            connectors=instant,
            databases=instant,
            mcp=instant,
            conventions=instant,
        )
        toolset = await assemble_toolset(agent, settings, backends, QUERY, select=False)
        connector = agent.connectors[0]
        action = connector.actions[0]
        calls = {
            "read_skill": ("read_skill", {"name": agent.skills[0].name}),
            "connector_discover": (
                "connector",
                {"subcommand": "discover", "connector": connector.name, "action": action.name},
            ),
            "connector_execute": (
                "connector",
                {
                    "subcommand": "execute",
                    "connector": connector.name,
                    "action": action.name,
                    "parameters": {},
                },
            ),
        }
        for key, (name, args) in calls.items():

            async def one(name: str = name, args: dict[str, Any] = args) -> None:
                result = await toolset.call(name, args, ctx)
                if not result.ok:
                    raise RuntimeError(f"{name} failed: {result.error}")

            samples = await _time(one, n)
            out[key] = {"p50_us": percentile(samples, 50), "p99_us": percentile(samples, 99)}
        base = await _time(lambda: instant.execute(connector, action, {}, ctx), n)
        out["backend_only_p50_us"] = percentile(base, 50)
        out["connector_execute"]["overhead_p50_us"] = (
            out["connector_execute"]["p50_us"] - out["backend_only_p50_us"]
        )
        await toolset.aclose()
    return out


def run(rounds: int | None = None, database: str = "auto") -> dict[str, Any]:
    rounds = rounds or ROUNDS
    result = asyncio.run(_streaming(rounds, database))
    result["dispatch"] = asyncio.run(_dispatch(max(200, rounds * 10)))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--database", choices=["auto", "postgres", "sqlite"], default="auto")
    args = parser.parse_args()
    r = run(args.rounds, args.database)
    rows = [
        [
            name,
            r[f"direct_{name}"]["p50_ms"],
            r[f"gateway_{name}"]["p50_ms"],
            r[f"added_{name}_p50_ms"],
            r[f"direct_{name}"]["p99_ms"],
            r[f"gateway_{name}"]["p99_ms"],
            r[f"added_{name}_p99_ms"],
        ]
        for name in ("first_event", "first_token", "total")
    ]
    print(f"database: {r['database']}, rounds: {r['rounds']}, token delay {r['token_delay_ms']} ms")
    print_table(
        rows, ["ms", "direct p50", "gw p50", "added p50", "direct p99", "gw p99", "added p99"]
    )
    print()
    d = r["dispatch"]
    print_table(
        [[k, v["p50_us"], v["p99_us"]] for k, v in d.items() if isinstance(v, dict)],
        ["dispatch", "p50 µs", "p99 µs"],
    )


if __name__ == "__main__":
    main()
