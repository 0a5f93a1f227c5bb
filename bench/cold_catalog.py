"""Large catalogs, cold: the first chat of an agent with ~2,000 legacy tools (issue #33).

Per round, on a new Postgres database:
1. `quiver serve`; GitHub's, Stripe's and Twilio's OpenAPI descriptions (`tests/data/openapi`,
   and Slack's when `bench.selection_real` finds it: ~2,040 operations) are imported through
   `POST /api/v1/connectors/import`, and one agent is wired to them in legacy mode (one tool
   per operation, runtime selection). Its first chat is sent at once: time to the response's
   first byte (its headers: the run is stored) and to its first event (`run_started`); then a
   second chat, and the preview (`GET /agents/{id}/toolset?query=`): its time and how many
   deferred tools it lists of how many.
2. The server is stopped and started again on the same database (no index in memory) and the
   same is measured once its start-up warm-up is done (`quiver_tool_index_builds` 0 on
   `/metrics`), after a second restart where the first chat is sent as soon as `/healthz`
   answers (the process is alive, nothing loaded yet), and after a third where it is sent as
   soon as `/readyz` answers 200 (what a load balancer or Kubernetes waits for: the start-up
   warm-up has the recent agents' tool sets in memory; their rankers may still be building).

Target (issue #33): first byte of a first chat ≤ 0.3 s at ~2,000 tools; the preview lists the
deferred tools the way `request_tools` does (at most 20, and their total).
`--compare PATH` runs every round in that checkout too (another git worktree, e.g. `main`),
the two in alternating order, and prints both; the targets are this checkout's.
Run: `python -m bench.cold_catalog [--rounds N] [--compare PATH]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from bench.common import print_table
from bench.selection_real import documents
from bench.servers import Gateway, gateway, scripted_llm
from tests.fixtures.database import create_database, drop_database

ROUNDS = 3
FIRST_BYTE_S = 0.3
LISTED = 20
MESSAGE = "list the open pull requests of octocat/hello-world"
CONFIG = {"connector_tool_mode": "legacy"}
PHASES = (
    "after import",
    "after restart, warmed",
    "after restart, at once",
    "after restart, once ready",
)


async def _import(client: httpx.AsyncClient) -> tuple[list[str], int]:
    ids, actions = [], 0
    for name, raw in documents().items():
        body = json.dumps({"name": name, "document": json.loads(raw)})
        r = await client.post(
            "/api/v1/connectors/import",
            content=body,
            headers={"content-type": "application/json"},
            timeout=600,
        )
        r.raise_for_status()
        ids.append(r.json()["id"])
        actions += int(r.json()["action_count"])
    return ids, actions


async def _chat(client: httpx.AsyncClient, agent_id: str) -> dict[str, float]:
    """Seconds to the response's headers and to its first SSE event."""
    start = time.perf_counter()
    body = {"agent_id": agent_id, "message": MESSAGE}
    async with client.stream("POST", "/api/v1/chat", json=body, timeout=120) as r:
        headers = time.perf_counter() - start
        if r.status_code != 200:
            raise RuntimeError(f"chat answered {r.status_code}: {(await r.aread())[:200]!r}")
        first = 0.0
        async for line in r.aiter_lines():
            if line.startswith("data:") and not first:
                first = time.perf_counter() - start
    return {"first_byte_s": headers, "first_event_s": first}


async def _preview(client: httpx.AsyncClient, agent_id: str) -> dict[str, Any]:
    start = time.perf_counter()
    r = await client.get(f"/api/v1/agents/{agent_id}/toolset", params={"query": MESSAGE})
    seconds = time.perf_counter() - start
    r.raise_for_status()
    selection = r.json()["selection"] or {}
    return {
        "preview_s": seconds,
        "deferred_listed": len(selection.get("deferred", [])),
        "deferred_total": selection.get("deferred_total", 0),
        "bytes": len(r.content),
    }


async def _measure(gw: Gateway, agent_id: str) -> dict[str, Any]:
    async with gw.client(timeout_s=600) as client:
        first = await _chat(client, agent_id)
        second = await _chat(client, agent_id)
        preview = await _preview(client, agent_id)
    return {**first, "second_first_byte_s": second["first_byte_s"], **preview}


async def _warmed(gw: Gateway) -> float:
    """Seconds until the start-up warm-up is done (`quiver_tool_index_builds` 0)."""
    start = time.perf_counter()
    async with gw.client() as client:
        while time.perf_counter() - start < 120:
            for line in (await client.get("/metrics")).text.splitlines():
                if line.startswith("quiver_tool_index_builds ") and float(line.split()[1]) == 0:
                    return time.perf_counter() - start
            await asyncio.sleep(0.1)
    raise RuntimeError("the start-up warm-up did not end within 120 s")


async def _ready(gw: Gateway) -> float:
    """Seconds until `/readyz` answers 200 (from `/healthz` answering)."""
    start = time.perf_counter()
    async with gw.client() as client:
        while time.perf_counter() - start < 120:
            if (await client.get("/readyz")).status_code == 200:
                return time.perf_counter() - start
            await asyncio.sleep(0.02)
    raise RuntimeError("/readyz did not answer 200 within 120 s")


async def _round(llm_url: str, root: Path | None = None) -> dict[str, Any]:
    db = await create_database("quiver_bench_cold")
    url = f"postgresql://postgres@127.0.0.1:5432/{db}"
    env = {"QUIVER_SECRET_KEYS": Fernet.generate_key().decode()}
    out: dict[str, Any] = {}
    try:
        async with gateway(llm_url, database_url=url, extra_env=env, root=root) as gw:
            async with gw.client(timeout_s=600) as client:
                ids, out["tools"] = await _import(client)
                agent = {"name": "catalog", "connector_ids": ids, "model_config_json": CONFIG}
                created = await client.post("/api/v1/agents", json=agent)
                created.raise_for_status()
                agent_id = created.json()["id"]
            out[PHASES[0]] = await _measure(gw, agent_id)
        async with gateway(llm_url, database_url=url, extra_env=env, root=root) as gw:
            warm_up = await _warmed(gw)
            out[PHASES[1]] = {**await _measure(gw, agent_id), "warm_up_s": warm_up}
        async with gateway(llm_url, database_url=url, extra_env=env, root=root) as gw:
            out[PHASES[2]] = await _measure(gw, agent_id)
        async with gateway(llm_url, database_url=url, extra_env=env, root=root) as gw:
            ready = await _ready(gw)
            out[PHASES[3]] = {**await _measure(gw, agent_id), "ready_s": ready}
    finally:
        await drop_database(db)
    return out


async def _run(rounds: int, compare: Path | None = None) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    loads = [os.getloadavg()]
    async with scripted_llm(token_delay_s=0.0, reply="Two pull requests are open.") as llm:
        for i in range(rounds):
            if compare is not None and i % 2 == 1:
                other.append(await _round(llm.base_url, compare))
            results.append(await _round(llm.base_url))
            if compare is not None and i % 2 == 0:
                other.append(await _round(llm.base_url, compare))
            loads.append(os.getloadavg())
    r: dict[str, Any] = {"rounds": results, "load_avg": loads, "tools": results[0]["tools"]}
    if compare is not None:
        r["compare"] = {"root": str(compare), "rounds": other}
    return r


def _values(r: dict[str, Any], phase: str, key: str) -> list[float]:
    return [float(x[phase][key]) for x in r["rounds"]]


def rows(r: dict[str, Any]) -> list[list[str]]:
    out = []
    for phase in PHASES:
        cells = [phase]
        for key in ("first_byte_s", "first_event_s", "second_first_byte_s", "preview_s"):
            values = _values(r, phase, key)
            spread = " / ".join(f"{v:.2f}" for v in values)
            cells.append(f"{statistics.median(values):.2f} ({spread})")
        listed = _values(r, phase, "deferred_listed")
        total = _values(r, phase, "deferred_total")
        cells.append(f"{max(listed):.0f} of {max(total):.0f}")
        out.append(cells)
    return out


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for phase in PHASES:
        values = _values(r, phase, "first_byte_s")
        found.append(
            {
                "target": f"first byte of the first chat ≤ {FIRST_BYTE_S:g} s ({phase})",
                "value": f"{statistics.median(values):.2f} s (rounds "
                + " / ".join(f"{v:.2f}" for v in values)
                + ")",
                "pass": max(values) <= FIRST_BYTE_S,
            }
        )
    listed = max(v for p in PHASES for v in _values(r, p, "deferred_listed"))
    total = min(v for p in PHASES for v in _values(r, p, "deferred_total"))
    found.append(
        {
            "target": f"the preview lists at most {LISTED} deferred tools and their total",
            "value": f"{listed:.0f} listed of {total:.0f}",
            "pass": 0 < listed <= LISTED and total > LISTED,
        }
    )
    return found


def run(quick: bool = False) -> dict[str, Any]:
    r = asyncio.run(_run(1 if quick else ROUNDS))
    r["targets"] = targets(r)
    return r


def _print_rounds(r: dict[str, Any]) -> None:
    headers = ["phase", "first byte s", "first event s", "2nd chat first byte s", "preview s"]
    print_table(rows(r), [*headers, "deferred listed"])


def print_results(r: dict[str, Any]) -> None:
    loads = " / ".join(f"{x[0]:.1f}" for x in r["load_avg"])
    warm_up = " / ".join(f"{x[PHASES[1]]['warm_up_s']:.1f}" for x in r["rounds"])
    ready = " / ".join(f"{x[PHASES[3]]['ready_s']:.2f}" for x in r["rounds"])
    print(
        f"{len(r['rounds'])} round(s), {r['tools']} legacy tools; start-up warm-up {warm_up} s;"
        f" /readyz 200 after /healthz {ready} s; load average {loads}"
    )
    print("median (rounds):")
    _print_rounds(r)
    if "compare" in r:
        print(f"\n{r['compare']['root']} (same rounds, alternating order):")
        _print_rounds(r["compare"])
    print()
    print_table(
        [[t["target"], t["value"], "pass" if t["pass"] else "FAIL"] for t in r["targets"]],
        ["target (issue #33)", "value", "status"],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", help="also write the results there")
    parser.add_argument(
        "--compare", type=Path, help="also run every round in this checkout (e.g. /work/main)"
    )
    args = parser.parse_args()
    r = asyncio.run(_run(args.rounds, args.compare))
    r["targets"] = targets(r)
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1) + "\n")
    print_results(r)


if __name__ == "__main__":
    main()
