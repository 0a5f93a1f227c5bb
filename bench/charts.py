"""Charts of a results file for the documentation's benchmark page.

`python -m bench.charts [--results bench/results.json] [--out docs/img/bench]` writes one SVG
per figure; `make bench` calls it after the run. A module that failed or did not run leaves its
chart out (the page keeps the previous one). The SVGs carry no date and a fixed hash salt, so
charts of the same numbers are the same bytes.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.json"
OUT = ROOT / "docs" / "img" / "bench"

Result = dict[str, Any]


def _ok(benchmarks: dict[str, Any], name: str) -> Result | None:
    entry = benchmarks.get(name) or {}
    result = entry.get("result")
    return result if entry.get("ok") and isinstance(result, dict) else None


def tokens_chart(benchmarks: dict[str, Any]) -> Figure | None:
    """Prompt-resident tokens, progressive vs all-legacy, as the reference catalog grows."""
    result = _ok(benchmarks, "pipeline")
    if result is None:
        return None
    scales = sorted((int(k.split("_")[1]), v) for k, v in result.items() if k.startswith("scale_"))
    if not scales:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    xs = [s for s, _ in scales]
    ax.plot(
        xs, [v["legacy_tokens"] for _, v in scales], "o-", label="all legacy (one tool per leaf)"
    )
    ax.plot(
        xs, [v["progressive_tokens"] for _, v in scales], "o-", label="progressive (Quiver default)"
    )
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs, [f"{x}x" for x in xs])
    ax.set_xlabel("catalog size (times the reference catalog)")
    ax.set_ylabel("prompt tokens per request (log)")
    ax.set_title("Tokens in every prompt")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return fig


def selection_chart(benchmarks: dict[str, Any]) -> Figure | None:
    """Recall@5 per dataset and ranker (the held-out split the bench reports)."""
    result = _ok(benchmarks, "selection")
    if result is None:
        return None
    rows: list[tuple[str, str, float]] = []
    for dataset, by_ranker in result.items():
        if not isinstance(by_ranker, dict):
            continue
        for key, metrics in by_ranker.items():
            if isinstance(metrics, dict) and key.endswith(" pool") and "recall@5" in metrics:
                rows.append(
                    (
                        dataset.split("/")[0] + "/" + dataset.split("/")[-1],
                        key[:-5],
                        metrics["recall@5"],
                    )
                )
    if not rows:
        return None
    datasets = sorted({d for d, _, _ in rows})
    rankers = sorted({r for _, r, _ in rows})
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.8 / len(rankers)
    for i, ranker in enumerate(rankers):
        values = {d: v for d, r, v in rows if r == ranker}
        xs = [j + i * width for j in range(len(datasets))]
        ax.bar(xs, [values.get(d, 0.0) for d in datasets], width, label=ranker)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(datasets))], datasets, fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("recall@5")
    ax.set_title("Tool selection quality")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def side_by_side_chart(benchmarks: dict[str, Any]) -> Figure | None:
    """Gateway CPU per run and first token at 50 and 200 runs started at once, per model,
    beside the baselines."""
    result = _ok(benchmarks, "side_by_side")
    if result is None or not isinstance(result.get("gateways"), dict):
        return None
    gateways: dict[str, Any] = result["gateways"]
    names = list(gateways)
    groups = [
        (model, level)
        for model in result.get("models", [])
        for level in sorted(int(n) for n in gateways[names[0]].get(model, {}))
    ]
    if not groups:
        return None
    fig, (cpu, first) = plt.subplots(1, 2, figsize=(9.6, 3.8))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs = [j + i * width for j in range(len(groups))]
        values = [gateways[name].get(m, {}).get(str(n), {}) for m, n in groups]
        cpu.bar(xs, [v.get("cpu_ms_per_run", 0) for v in values], width, label=name)
        first.bar(xs, [v.get("first_token_p50_ms", 0) for v in values], width, label=name)
    for ax, label in ((cpu, "gateway CPU per run (ms)"), (first, "first token p50 (ms)")):
        ax.set_xticks(
            [j + 0.4 - width / 2 for j in range(len(groups))],
            [f"{n} at once\n{m}" for m, n in groups],
        )
        ax.set_ylabel(label)
        ax.grid(True, axis="y", alpha=0.3)
    cpu.legend()
    fig.suptitle("Chat runs beside a bare relay (B1) and a durable relay (B2)")
    fig.tight_layout()
    return fig


def mcp_call_chart(benchmarks: dict[str, Any]) -> Figure | None:
    """One MCP tool call: p50 and CPU per call through every path of `bench.mcp_calls`."""
    result = _ok(benchmarks, "mcp_endpoint")
    calls = (result or {}).get("call")
    if not isinstance(calls, dict) or not isinstance(calls.get("paths"), dict):
        return None
    paths: dict[str, Any] = calls["paths"]
    names = sorted(paths, key=lambda n: paths[n]["p50_ms"])
    labels = [calls["labels"].get(n, n) for n in names]
    fig, (lat, cpu) = plt.subplots(1, 2, figsize=(10.4, 0.45 * len(names) + 1.6))
    lat.barh(labels, [paths[n]["p50_ms"] for n in names])
    cpu.barh(labels, [paths[n]["cpu_ms_per_call"] for n in names])
    lat.set_xlabel("p50 per call (ms)")
    cpu.set_xlabel("server CPU per call (ms)")
    cpu.set_yticks([])
    for ax in (lat, cpu):
        ax.invert_yaxis()
        ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle("An MCP tool call (mcp-server-time over stdio), medians over rounds")
    fig.tight_layout()
    return fig


def soak_chart(benchmarks: dict[str, Any]) -> Figure | None:
    """The gateway's memory over the soak (100 clients chatting back to back)."""
    result = _ok(benchmarks, "load")
    soak: Result = (result or {}).get("soak") or {}
    samples = soak.get("rss_samples_mib")
    if not samples:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.plot([t for t, _ in samples], [rss for _, rss in samples])
    ax.set_xlabel("seconds")
    ax.set_ylabel("gateway RSS (MiB)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Soak: memory growth {soak['rss_growth_pct']:.1f} %, {soak['errors']} errors")
    ax.grid(True, alpha=0.3)
    return fig


CHARTS: dict[str, Callable[[dict[str, Any]], Figure | None]] = {
    "tokens": tokens_chart,
    "selection": selection_chart,
    "side-by-side": side_by_side_chart,
    "mcp-call": mcp_call_chart,
    "soak": soak_chart,
}


def write_charts(results: Path = RESULTS, out: Path = OUT) -> list[Path]:
    benchmarks = json.loads(results.read_text()).get("benchmarks", {})
    out.mkdir(parents=True, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "quiver"
    written = []
    for name, draw in CHARTS.items():
        fig = draw(benchmarks)
        if fig is None:
            continue
        path = out / f"{name}.svg"
        fig.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
        plt.close(fig)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Charts of a benchmark results file")
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    for path in write_charts(Path(args.results), Path(args.out)):
        print(path)


if __name__ == "__main__":
    main()
