"""One MCP `tools/call`, side by side: Quiver's endpoint, other MCP gateways and the floors.

Every path calls `get_current_time` of the same upstream, `mcp-server-time` over stdio, on one
pooled client session per path (this process is the client of all of them):
- direct: the SDK's client on its own stdio session (no HTTP at all; floor 1);
- floor: the bare SDK streamable-HTTP server of `bench.mcp_floor` (low-level `Server` and its
  `StreamableHTTPSessionManager`, one pooled stdio session, no auth or journal; floor 2);
- floor_http: the same process's bare JSON route (`POST /call`), the admin route's floor;
- floor_durable (when Postgres is up): the bare SDK server committing one row per call (the
  call's result) to Postgres before it answers: the floor of a gateway that stores what it
  answers;
- admin: Quiver's `POST /api/v1/mcp-servers/{id}/call` (Postgres);
- endpoint_{pg,sqlite}_{legacy,progressive}: Quiver's `/mcp/agents/{name}` `tools/call` on
  Postgres and on SQLite, the agent in legacy mode (the tool called by name) or progressive (the
  `mcp` tool's `call` subcommand), each call journaled (`tool_call`, `tool_result`) and audited;
- the peers of `bench.mcp_peers` (FastMCP's proxy, mcp-proxy, LiteLLM's MCP gateway), installed
  in venvs of their own on first use; one that cannot be installed is reported and left out.

Each HTTP path has a server process of its own, so a path's CPU per call is its process's
user+system CPU over a round (/proc, its stdio upstream excluded) over the round's calls: work
done after the answer counts, and so does what the process does idle (printed beside: CPU ms/s
over a quiet second). Direct's CPU is this process's CPU inside its calls.

`ROUNDS` rounds of `CALLS` iterations; each iteration calls every path once, in an order
shuffled anew (`random.Random(seed)`, the seed printed): a fixed rotation lets one path sit
behind the same neighbour every time. Per round: p50 / p99, CPU per call, and ratios to the
floors and to FastMCP; the summary is the median over rounds with the spread (min-max).

Targets (issue #33): each Quiver endpoint path's p50 and CPU per call <= FastMCP's proxy
(stretch: <= mcp-proxy's).
Run: `python -m bench.mcp_calls [--rounds 3] [--calls 300] [--seed N] [--peers fastmcp,...]
[--stores postgres,sqlite] [--compare ../main]` (`--compare`: another checkout's endpoint, legacy
mode on each store, as more paths of the same run).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.common import percentile, print_table
from bench.mcp_floor import floor
from bench.mcp_peers import PEERS, ensure_venv, serve_peer
from bench.servers import Gateway, _postgres_up, gateway
from tests.fixtures.database import create_database, drop_database
from tests.mcp.servers import TIME_SERVER

ROUNDS = 3
CALLS = 300
WARMUP = 20
CONCURRENCY = 50
ARGS = {"timezone": "UTC"}
STORES = ("postgres", "sqlite")
MODES = ("legacy", "progressive")
FLOORS = {"floor_http": "floor_http", "admin": "floor_http"}
"""Each path's floor (the same hop without Quiver): the JSON route for the admin route, the
bare SDK server for every MCP path (the default)."""
ADMIN_TARGET = 1.3
"""Admin route p50 <= 1.3x a direct SDK call (issue #15)."""

Call = Callable[[], Awaitable[None]]


@dataclass
class Hop:
    name: str
    label: str
    call: Call
    pid: int | None
    """The serving process (its CPU per round); None: this process, CPU inside the calls."""


def cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of a process (this one when None), children excluded."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode="legacy", cache=None) as client:
            yield client


def quiver_session(base_url: str, token: str, agent: str) -> Any:
    return http_session(f"{base_url}/mcp/agents/{agent}", {"Authorization": f"Bearer {token}"})


async def setup_agent(
    admin: httpx.AsyncClient, mode: str = "legacy", name: str = "mcpbench"
) -> tuple[str, str]:
    """Register `mcp-server-time` (as `clock`) and an agent using it in `mode`; (server id,
    the admin token, which may use the agent)."""
    server = (
        await admin.post(
            "/api/v1/mcp-servers",
            json={"name": "clock", "transport": "stdio", "command": TIME_SERVER},
        )
    ).json()
    (await admin.post(f"/api/v1/mcp-servers/{server['id']}/refresh")).raise_for_status()
    agent = {
        "name": name,
        "mcp_server_ids": [server["id"]],
        "model_config_json": {"mcp_tool_mode": mode},
    }
    (await admin.post("/api/v1/agents", json=agent)).raise_for_status()
    return str(server["id"]), str(admin.headers["Authorization"]).removeprefix("Bearer ")


def _checked(client: Client, tool: str, args: dict[str, Any]) -> Call:
    async def call() -> None:
        result = await client.call_tool(tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool}: {result.content}")

    return call


async def _tool_named(client: Client, suffix: str) -> str:
    (name,) = [t.name for t in (await client.list_tools()).tools if t.name.endswith(suffix)]
    return name


async def _endpoint(
    stack: contextlib.AsyncExitStack, store: str, mode: str, root: Path | None = None
) -> Hop:
    """Quiver's endpoint in a gateway of its own on `store`, the agent in `mode`; `root`:
    another checkout's Quiver (`--compare`)."""
    env = {"QUIVER_MCP_STDIO_COMMANDS": TIME_SERVER}
    gw: Gateway = await stack.enter_async_context(
        gateway("http://127.0.0.1:9/v1", database=store, extra_env=env, root=root)
    )
    admin = await stack.enter_async_context(gw.client())
    _, token = await setup_agent(admin, mode)
    client = await stack.enter_async_context(quiver_session(gw.base_url, token, "mcpbench"))
    if mode == "legacy":
        call = _checked(client, await _tool_named(client, "get_current_time"), ARGS)
    else:
        args = {"subcommand": "call", "server": "clock", "tool": "get_current_time"}
        call = _checked(client, "mcp", {**args, "parameters": ARGS})
    short = "pg" if store == "postgres" else store
    name, label = f"endpoint_{short}_{mode}", f"Quiver endpoint, {store}, {mode}"
    if root is not None:
        name, label = f"{root.name}_{short}_{mode}", f"Quiver@{root.name} endpoint, {store}, {mode}"
    return Hop(name, label, call, gw.proc.pid)


async def _quiver_paths(
    stack: contextlib.AsyncExitStack, stores: tuple[str, ...], compare: Path | None
) -> list[Hop]:
    paths = [await _endpoint(stack, store, mode) for store in stores for mode in MODES]
    if compare is not None:  # its legacy mode only: the same code path as progressive
        paths += [await _endpoint(stack, store, "legacy", compare) for store in stores]
    env = {"QUIVER_MCP_STDIO_COMMANDS": TIME_SERVER}
    gw = await stack.enter_async_context(gateway("http://127.0.0.1:9/v1", extra_env=env))
    admin = await stack.enter_async_context(gw.client())
    server_id, _ = await setup_agent(admin)

    async def via_admin() -> None:
        response = await admin.post(
            f"/api/v1/mcp-servers/{server_id}/call",
            json={"tool": "get_current_time", "arguments": ARGS},
        )
        if response.status_code != 200 or not response.json()["ok"]:
            raise RuntimeError(response.text)

    paths.append(Hop("admin", f"Quiver admin route, {gw.database}", via_admin, gw.proc.pid))
    return paths


async def _floor_paths(stack: contextlib.AsyncExitStack) -> list[Hop]:
    direct = await stack.enter_async_context(
        Client(StdioServerParameters(command=TIME_SERVER, args=[]), mode="legacy", cache=None)
    )
    bare = await stack.enter_async_context(floor(TIME_SERVER))
    bare_mcp = await stack.enter_async_context(http_session(bare.url, {}))
    json_floor = await stack.enter_async_context(floor(TIME_SERVER))
    http = await stack.enter_async_context(httpx.AsyncClient(timeout=60.0))

    async def via_floor_http() -> None:
        body = {"tool": "get_current_time", "arguments": ARGS}
        response = await http.post(json_floor.call_url, json=body)
        if response.status_code != 200 or not response.json()["ok"]:
            raise RuntimeError(response.text)

    tool, bare_pid = "get_current_time", bare.proc.pid
    paths = [
        Hop("direct", "direct stdio session (SDK client)", _checked(direct, tool, ARGS), None),
        Hop("floor", "bare SDK streamable-HTTP server", _checked(bare_mcp, tool, ARGS), bare_pid),
        Hop("floor_http", "bare JSON route", via_floor_http, json_floor.proc.pid),
    ]
    if await _postgres_up():  # the same server, committing each call's result first
        name = await create_database("quiver_bench_floor")
        stack.push_async_callback(drop_database, name)
        dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
        durable = await stack.enter_async_context(floor(TIME_SERVER, journal=dsn))
        durable_mcp = await stack.enter_async_context(http_session(durable.url, {}))
        label = "bare SDK server + one commit per call (Postgres)"
        call = _checked(durable_mcp, tool, ARGS)
        paths.append(Hop("floor_durable", label, call, durable.proc.pid))
    return paths


async def _peer_paths(
    stack: contextlib.AsyncExitStack, status: dict[str, str], names: tuple[str, ...]
) -> list[Hop]:
    paths: list[Hop] = []
    for peer in (p for p in PEERS if p.name in names):
        venv = await asyncio.to_thread(ensure_venv, peer)
        if isinstance(venv, str):
            status[peer.name] = venv
            print(f"bench: {peer.label} left out: {venv}", flush=True)
            continue
        try:
            served = await stack.enter_async_context(serve_peer(peer, venv, TIME_SERVER))
            client = await stack.enter_async_context(http_session(served.url, served.headers))
            tool = await _tool_named(client, "get_current_time")
        except Exception as exc:  # reported, the others go on
            status[peer.name] = f"did not start: {type(exc).__name__}: {exc}"[:400]
            print(f"bench: {peer.label} left out: {status[peer.name]}", flush=True)
            continue
        status[peer.name] = "ok"
        paths.append(Hop(peer.name, peer.label, _checked(client, tool, ARGS), served.proc.pid))
    return paths


async def _idle_cpu(paths: list[Hop], seconds: float = 1.0) -> dict[str, float]:
    """CPU ms per second of each server process while nobody calls it."""
    before = {p.name: cpu_s(p.pid) for p in paths if p.pid is not None}
    await asyncio.sleep(seconds)
    return {
        p.name: (cpu_s(p.pid) - before[p.name]) * 1000 / seconds for p in paths if p.pid is not None
    }


async def _round(paths: list[Hop], calls: int, rng: random.Random) -> dict[str, dict[str, float]]:
    wall: dict[str, list[float]] = {p.name: [] for p in paths}
    own_cpu = {p.name: 0.0 for p in paths}
    before = {p.name: cpu_s(p.pid) for p in paths}
    order = list(paths)
    for _ in range(calls):
        rng.shuffle(order)
        for path in order:
            cpu0 = time.process_time()
            started = time.perf_counter()
            await path.call()
            wall[path.name].append((time.perf_counter() - started) * 1000)
            own_cpu[path.name] += time.process_time() - cpu0
    await asyncio.sleep(0.3)  # work done after the last answers
    out: dict[str, dict[str, float]] = {}
    for p in paths:
        spent = own_cpu[p.name] if p.pid is None else cpu_s(p.pid) - before[p.name]
        out[p.name] = {
            "p50_ms": percentile(wall[p.name], 50),
            "p99_ms": percentile(wall[p.name], 99),
            "cpu_ms_per_call": spent * 1000 / calls,
        }
    _add_ratios(out)
    return out


def _add_ratios(r: dict[str, dict[str, float]]) -> None:
    """Each path's p50 against direct, its floor, FastMCP and mcp-proxy; CPU against the
    last two."""
    for name, m in r.items():
        m["p50_vs_direct"] = m["p50_ms"] / r["direct"]["p50_ms"]
        m["p50_vs_floor"] = m["p50_ms"] / r[FLOORS.get(name, "floor")]["p50_ms"]
        for peer in ("fastmcp", "mcp-proxy"):
            if peer in r:
                m[f"p50_vs_{peer}"] = m["p50_ms"] / r[peer]["p50_ms"]
                m[f"cpu_vs_{peer}"] = m["cpu_ms_per_call"] / r[peer]["cpu_ms_per_call"]


async def _throughput(call: Call, concurrency: int, per_worker: int) -> float:
    """Calls per second with `concurrency` callers each making `per_worker` calls."""

    async def worker() -> None:
        for _ in range(per_worker):
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return concurrency * per_worker / (time.perf_counter() - started)


async def side_by_side(
    rounds: int = ROUNDS,
    calls: int = CALLS,
    seed: int | None = None,
    peers: tuple[str, ...] = tuple(p.name for p in PEERS),
    stores: tuple[str, ...] = STORES,
    compare: Path | None = None,
) -> dict[str, Any]:
    seed = random.randrange(2**31) if seed is None else seed
    rng = random.Random(seed)
    print(f"bench.mcp_calls: seed {seed} (path order shuffled every iteration)", flush=True)
    status: dict[str, str] = {}
    out: dict[str, Any] = {"rounds": rounds, "calls": calls, "seed": seed}
    out["load_avg_start"] = os.getloadavg()
    async with contextlib.AsyncExitStack() as stack:
        paths = await _floor_paths(stack)
        paths += await _quiver_paths(stack, stores, compare)
        paths += await _peer_paths(stack, status, peers)
        labels = {p.name: p.label for p in paths}
        order = list(paths)
        for _ in range(WARMUP):
            rng.shuffle(order)
            for path in order:
                await path.call()
        out["idle_cpu_ms_per_s"] = await _idle_cpu(paths)
        per_round = []
        for r in range(rounds):
            per_round.append(await _round(paths, calls, rng))
            print_round(r + 1, per_round[-1], labels)
        by_name = {p.name: p for p in paths}
        per_worker = max(1, calls // CONCURRENCY * 2)
        rate = {
            name: await _throughput(by_name[name].call, CONCURRENCY, per_worker)
            for name in ("direct", "floor_http", "admin")
        }
    out["load_avg_end"] = os.getloadavg()
    out["peers"] = status
    out["labels"] = labels
    out["per_round"] = per_round
    out["paths"] = summarize(per_round)
    for name, value in rate.items():
        out["paths"][name][f"calls_per_s_at_{CONCURRENCY}"] = value
    out["concurrency"] = CONCURRENCY
    out["targets"] = targets(out["paths"])
    return out


def summarize(per_round: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Per path and metric: the median over rounds, and the spread (min, max)."""
    out: dict[str, dict[str, Any]] = {}
    for name in per_round[0]:
        metrics = per_round[0][name].keys()
        values = {k: [r[name][k] for r in per_round] for k in metrics}
        out[name] = {k: statistics.median(v) for k, v in values.items()}
        out[name]["spread"] = {k: [min(v), max(v)] for k, v in values.items()}
    return out


def targets(paths: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue #33: each endpoint path's p50 and CPU per call <= FastMCP's (stretch: mcp-proxy)."""
    rows: list[dict[str, Any]] = []
    endpoints = [n for n in paths if n.startswith("endpoint_")]
    for peer, kind in (("fastmcp", "target"), ("mcp-proxy", "stretch")):
        if peer not in paths:
            continue
        for name in endpoints:
            m = paths[name]
            for metric, key in (("p50", f"p50_vs_{peer}"), ("CPU per call", f"cpu_vs_{peer}")):
                low, high = m["spread"][key]
                rows.append(
                    {
                        "target": f"{name} {metric} <= {peer} ({kind})",
                        "ratio": m[key],
                        "spread": [low, high],
                        "pass": m[key] <= 1.0,
                    }
                )
    admin = paths.get("admin")
    if admin is not None:
        rows.append(
            {
                "target": f"admin p50 <= {ADMIN_TARGET}x direct (issue #15)",
                "ratio": admin["p50_vs_direct"],
                "spread": admin["spread"]["p50_vs_direct"],
                "pass": admin["p50_vs_direct"] <= ADMIN_TARGET,
            }
        )
    return rows


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _cell(m: dict[str, Any], key: str) -> str:
    """A median with its spread over rounds, e.g. `1.23x (1.10-1.31)`."""
    if key not in m:
        return ""
    suffix = "" if key.endswith("_ms") or key.startswith("cpu_ms") else "x"
    text = f"{m[key]:.2f}{suffix}"
    if key in m.get("spread", {}):
        low, high = m["spread"][key]
        text += f" ({low:.2f}-{high:.2f})"
    return text


COLUMNS = {
    "p50_ms": "p50 ms",
    "p99_ms": "p99 ms",
    "cpu_ms_per_call": "CPU ms/call",
    "p50_vs_direct": "p50/direct",
    "p50_vs_floor": "p50/floor",
    "p50_vs_fastmcp": "p50/FastMCP",
    "cpu_vs_fastmcp": "CPU/FastMCP",
    "p50_vs_mcp-proxy": "p50/mcp-proxy",
    "cpu_vs_mcp-proxy": "CPU/mcp-proxy",
}
"""Each metric of a row and its column's title."""


def _rows(r: dict[str, dict[str, Any]], labels: dict[str, str]) -> list[list[Any]]:
    ordered = sorted(r.items(), key=lambda kv: kv[1]["p50_ms"])
    return [[labels.get(name, name), *(_cell(m, k) for k in COLUMNS)] for name, m in ordered]


HEADERS = ["get_current_time via", *COLUMNS.values()]


def print_round(n: int, r: dict[str, dict[str, float]], labels: dict[str, str]) -> None:
    print(f"\nround {n} (load average {os.getloadavg()[0]:.1f})")
    print_table(_rows(r, labels), HEADERS)


def print_results(out: dict[str, Any]) -> None:
    start, end = out["load_avg_start"][0], out["load_avg_end"][0]
    print(
        f"\n{out['rounds']} rounds x {out['calls']} calls per path, seed {out['seed']}, "
        f"load average {start:.1f} -> {end:.1f}; medians over rounds (min-max)"
    )
    print_table(_rows(out["paths"], out["labels"]), HEADERS)
    for name, reason in out["peers"].items():
        if reason != "ok":
            print(f"{name}: {reason}")
    idle = ", ".join(f"{k} {v:.2f}" for k, v in out["idle_cpu_ms_per_s"].items())
    print(f"idle CPU ms/s: {idle}")
    print()
    print_table(
        [
            [t["target"], _x(t["ratio"]), f"{_x(t['spread'][0])}-{_x(t['spread'][1])}",
             "pass" if t["pass"] else "miss"]
            for t in out["targets"]
        ],
        ["target", "median", "spread over rounds", "status"],
    )  # fmt: skip


def markdown(out: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|---|" + "---:|" * (len(HEADERS) - 1)]
    for row in _rows(out["paths"], out["labels"]):
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def run(**kwargs: Any) -> dict[str, Any]:
    return asyncio.run(side_by_side(**kwargs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--peers", default=",".join(p.name for p in PEERS), help="which peers ('' for none)"
    )
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--json", help="also write the results there")
    parser.add_argument(
        "--compare", type=Path, help="another checkout (e.g. a worktree of main): more paths"
    )
    args = parser.parse_args()
    stores = tuple(s for s in args.stores.split(",") if s)
    peers = tuple(p for p in args.peers.split(",") if p)
    out = run(
        rounds=args.rounds,
        calls=args.calls,
        seed=args.seed,
        peers=peers,
        stores=stores,
        compare=args.compare,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print_results(out)
    print()
    print(markdown(out))


if __name__ == "__main__":
    main()
