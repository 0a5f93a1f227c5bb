"""`python -m bench [--quick] [--only a,b]`: every benchmark, a summary table, bench/results.json.

Each bench module's `run()` executes in its own subprocess (`python -m bench --one NAME`) with
a time limit, so one crash, hang or leaked loop cannot take the others down; a failure is
recorded (error text in results.json, `ERROR` rows in the table) and the suite continues.
`--quick` shrinks the sample counts (and the load levels/soak); the targets stay the same.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.charts import write_charts
from bench.common import print_table
from bench.summary import summary_rows

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results.json"
MODULES = (
    "pipeline",
    "token_kinds",
    "selection",
    "knowledge",
    "chat_overhead",
    "connector_overhead",
    "sql_safety",
    "mcp_overhead",
    "cancel",
    "mcp_endpoint",
    "llm_stream",
    "load",
    "side_by_side",
    "cold_catalog",
    "workers",
)
TIMEOUT_S = {
    "pipeline": 2400,
    "load": 2400,
    "sql_safety": 1200,
    "side_by_side": 3000,
    "workers": 1500,
    "mcp_endpoint": 2400,  # the peers' venvs are installed on the first run
}
DEFAULT_TIMEOUT_S = 900
# Sample counts per module: module globals set before run() (full, quick).
KNOBS: dict[str, tuple[dict[str, int], dict[str, int]]] = {
    "pipeline": ({"ROUNDS": 100, "WARMUP": 10}, {"ROUNDS": 30, "WARMUP": 3}),
    "chat_overhead": ({"ROUNDS": 60}, {"ROUNDS": 20}),
    "connector_overhead": ({}, {"ITERATIONS": 100, "WARMUP": 10}),
    "mcp_overhead": ({}, {"CALLS": 100, "WARMUP": 10}),
    "cancel": ({"ROUNDS": 10}, {"ROUNDS": 3}),
    "mcp_endpoint": ({}, {"ROUNDS": 1, "CALLS": 50}),
    "llm_stream": ({}, {"WARMUP": 5}),
}
# Keyword arguments for run() (full, quick), for modules whose sample count is a parameter.
ARGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "llm_stream": ({}, {"calls": 50}),
    "load": ({}, {"quick": True}),
    "side_by_side": ({}, {"quick": True}),
    "cold_catalog": ({}, {"quick": True}),
    "workers": ({}, {"rounds": 1}),
}


def machine() -> dict[str, Any]:
    mem = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem / 2**30, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_avg_at_start": os.getloadavg(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def run_one(name: str, quick: bool, out: Path) -> None:
    """Child side: set the sample knobs, call `run()`, write its dict (or the error) to `out`."""
    import importlib

    start = time.perf_counter()
    try:
        module = importlib.import_module(f"bench.{name}")
        for attr, value in KNOBS.get(name, ({}, {}))[1 if quick else 0].items():
            setattr(module, attr, value)
        result: Any = module.run(**ARGS.get(name, ({}, {}))[1 if quick else 0])
        payload = {"ok": True, "result": result}
    except BaseException as exc:  # recorded, never silent
        payload = {
            "ok": False,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
        }
    payload["seconds"] = round(time.perf_counter() - start, 1)
    out.write_text(json.dumps(payload, default=str))


def run_child(name: str, quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="quiver-bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, "-m", "bench", "--one", name, "--out", str(out)]
        if quick:
            cmd.append("--quick")
        limit = TIMEOUT_S.get(name, DEFAULT_TIMEOUT_S)
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, timeout=limit, check=False)
        except subprocess.TimeoutExpired:
            return {
                "ok": False,
                "error": f"timed out after {limit} s",
                "seconds": round(time.perf_counter() - start, 1),
            }
        if out.exists():
            data: dict[str, Any] = json.loads(out.read_text())
            return data
        return {
            "ok": False,
            "error": f"exited with {proc.returncode} without a result",
            "seconds": round(time.perf_counter() - start, 1),
        }


def markdown(report: dict[str, Any]) -> str:
    """The summary of a results file as a Markdown table (for the README)."""
    m = report["machine"]
    lines = [
        f"{m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB RAM, Python {m['python']}, "
        f"{m['date']}{' (--quick)' if report.get('quick') else ''}; load average at start "
        + " / ".join(f"{x:.1f}" for x in m["load_avg_at_start"]),
        "",
        "| metric | value | target | status |",
        "|---|---:|---|---|",
    ]
    for row in summary_rows(report["benchmarks"]):
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run every Quiver benchmark")
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter load")
    parser.add_argument("--only", help="comma-separated module names")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--results", default=str(RESULTS), help="where to write the JSON")
    parser.add_argument(
        "--markdown", action="store_true", help="print the saved results as a Markdown table"
    )
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.results).read_text())))
        return
    if args.one:
        run_one(args.one, args.quick, Path(args.out))
        return
    names = [n for n in (args.only.split(",") if args.only else MODULES) if n]
    report: dict[str, Any] = {"machine": machine(), "quick": args.quick, "benchmarks": {}}
    for name in names:
        print(f"\n=== bench.{name} {'(quick)' if args.quick else ''}", flush=True)
        report["benchmarks"][name] = outcome = run_child(name, args.quick)
        status = "ok" if outcome.get("ok") else f"FAILED: {outcome.get('error')}"
        print(f"=== bench.{name}: {status} ({outcome.get('seconds')} s)", flush=True)
    rows = summary_rows(report["benchmarks"])
    report["summary"] = [
        dict(zip(("metric", "value", "target", "status"), r, strict=True)) for r in rows
    ]
    Path(args.results).write_text(json.dumps(report, indent=1, default=str) + "\n")
    m = report["machine"]
    print(
        f"\nQuiver benchmarks — {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, "
        f"Python {m['python']}, {m['date']}{' (quick)' if args.quick else ''}"
    )
    print_table(rows, ["metric", "value", "target", "status"])
    misses = sum(1 for r in rows if r[3] in ("miss", "ERROR"))
    print(f"\n{misses} miss/error row(s); results in {args.results}")
    for chart in write_charts(Path(args.results)):
        print(f"chart: {chart.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
