"""Tool-selection quality and latency of the lexical ranker on the shared datasets.

Run: `.venv/bin/python -m bench.selection`. Data: `$QUIVER_BENCH_DATA` or `../shared/data` next to
the repository. Every `selection/<dataset>/queries*.jsonl` is scored against the matching
`tools*.jsonl` (`queries_x.jsonl` uses `tools_x.jsonl` when present, else `tools.jsonl`).

Protocols: `pool` ranks the whole tools file for every query (the protocol of the BM25 baselines in
the data README); `candidates` ranks only the tools the query's source row offered, when the file
has a `candidates` field. Irrelevance files (no gold) report the abstain rate instead of recall.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.pipeline.ranker import LexicalRanker, ScoredTool
from app.tools.base import ToolDef
from bench.common import bench_data_dir, percentile, print_table

KS = (3, 5, 6, 10)


def data_dir() -> Path:
    return bench_data_dir("selection")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_tools(path: Path) -> list[ToolDef]:
    """Dataset tools as ToolDefs (`input_schema` -> parameters)."""
    tools = []
    for row in read_jsonl(path):
        schema = row.get("input_schema") or {"type": "object", "properties": {}}
        tools.append(
            ToolDef(name=row["name"], description=row.get("description") or "", parameters=schema)
        )
    return tools


def base_names(path: Path) -> dict[str, str]:
    """Tool name -> source name (`original_name` where the pooled name carries a suffix)."""
    return {row["name"]: row.get("original_name") or row["name"] for row in read_jsonl(path)}


def gold_units(query: dict[str, Any]) -> list[list[str]]:
    groups = query.get("gold_groups")
    if groups:
        return [list(g) for g in groups]
    return [[g] for g in query.get("gold", [])]


@dataclass
class Scores:
    """Accumulates per-query metrics for one (query file, protocol)."""

    n: int = 0
    recall: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    all_gold: dict[int, float] = field(default_factory=lambda: dict.fromkeys(KS, 0.0))
    rr: float = 0.0
    ms: list[float] = field(default_factory=list)

    def add(self, ranked: Sequence[str], units: list[list[str]], ms: float) -> None:
        self.n += 1
        self.ms.append(ms)
        positions = [
            min((ranked.index(g) for g in unit if g in ranked), default=None) for unit in units
        ]
        for k in KS:
            hits = sum(1 for p in positions if p is not None and p < k)
            self.recall[k] += hits / len(units)
            self.all_gold[k] += float(hits == len(units))
        found = [p for p in positions if p is not None]
        self.rr += 1.0 / (min(found) + 1) if found else 0.0

    def result(self) -> dict[str, float]:
        n = max(1, self.n)
        out: dict[str, float] = {"n": self.n}
        out.update({f"recall@{k}": self.recall[k] / n for k in KS})
        out.update({f"all_gold@{k}": self.all_gold[k] / n for k in KS})
        out["mrr"] = self.rr / n
        out["ms_p50"] = percentile(self.ms, 50)
        out["ms_p99"] = percentile(self.ms, 99)
        return out


def _timed_rank(ranker: LexicalRanker, query: str) -> tuple[list[ScoredTool], float]:
    start = time.perf_counter()
    scored = ranker.rank(query, k=max(KS))
    return scored, (time.perf_counter() - start) * 1000.0


def _subset_ranker(
    by_name: dict[str, ToolDef],
) -> Callable[[Sequence[str]], LexicalRanker]:
    def make(names: Sequence[str]) -> LexicalRanker:
        return LexicalRanker.cached([by_name[n] for n in names if n in by_name])

    return make


def evaluate_file(
    queries: list[dict[str, Any]], tools: list[ToolDef], aliases: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Metrics per protocol for one query file (recall files) or abstain rates (irrelevance)."""
    started = time.perf_counter()
    pool = LexicalRanker(tools)
    build_ms = (time.perf_counter() - started) * 1000.0
    subset = _subset_ranker({t.name: t for t in tools})
    has_candidates = any("candidates" in q for q in queries)
    relevant = [q for q in queries if gold_units(q)]
    out: dict[str, dict[str, float]] = {}
    if relevant:
        protocols = {"pool": Scores(), "pool_lenient": Scores()}
        if has_candidates:
            protocols["candidates"] = Scores()
        abstain = {"pool": 0, "candidates": 0}
        for q in relevant:
            units = gold_units(q)
            scored, ms = _timed_rank(pool, q["query"])
            names = [s.name for s in scored]
            protocols["pool"].add(names, units, ms)
            abstain["pool"] += pool.should_abstain(scored)
            lenient = [[n for n in aliases if aliases[n] in {aliases[g] for g in u}] for u in units]
            protocols["pool_lenient"].add(names, lenient, ms)
            if has_candidates:
                ranker = subset(q.get("candidates", []))
                scored, ms = _timed_rank(ranker, q["query"])
                protocols["candidates"].add([s.name for s in scored], units, ms)
                abstain["candidates"] += ranker.should_abstain(scored)
        if all(aliases[n] == n for n in aliases):
            del protocols["pool_lenient"]
        for name, scores in protocols.items():
            out[name] = scores.result()
            base = "candidates" if name == "candidates" else "pool"
            out[name]["false_abstain"] = abstain[base] / max(1, len(relevant))
            out[name]["build_ms"] = build_ms if base == "pool" else 0.0
    irrelevant = [q for q in queries if q.get("irrelevant")]
    if irrelevant:
        pool_abstain = cand_abstain = 0
        for q in irrelevant:
            pool_abstain += pool.should_abstain(pool.rank(q["query"], k=1))
            if has_candidates:
                ranker = subset(q.get("candidates", []))
                cand_abstain += ranker.should_abstain(ranker.rank(q["query"], k=1))
        out["irrelevance"] = {
            "n": len(irrelevant),
            "abstain_pool": pool_abstain / len(irrelevant),
            "abstain_candidates": cand_abstain / len(irrelevant) if has_candidates else 0.0,
        }
    return out


def _tools_for(queries_path: Path) -> Path:
    suffix = queries_path.stem.removeprefix("queries")
    paired = queries_path.with_name(f"tools{suffix}.jsonl")
    return paired if paired.exists() else queries_path.with_name("tools.jsonl")


def run(root: Path | None = None) -> dict[str, Any]:
    """Evaluate every selection dataset; returns {"<dataset>/<file>": {protocol: metrics}}."""
    base = (root or data_dir()) / "selection"
    results: dict[str, Any] = {}
    for ds in sorted(p for p in base.iterdir() if (p / "tools.jsonl").exists()):
        for qpath in sorted(ds.glob("queries*.jsonl")):
            tpath = _tools_for(qpath)
            results[f"{ds.name}/{qpath.stem}"] = evaluate_file(
                read_jsonl(qpath), load_tools(tpath), base_names(tpath)
            )
    return results


def main() -> None:
    results = run()
    rows = []
    abstain_rows = []
    for key, protocols in results.items():
        for proto, m in protocols.items():
            if proto == "irrelevance":
                abstain_rows.append([key, m["n"], m["abstain_pool"], m["abstain_candidates"]])
                continue
            rows.append(
                [f"{key} [{proto}]", m["n"]]
                + [m[f"recall@{k}"] for k in KS]
                + [m[f"all_gold@{k}"] for k in KS]
                + [m["mrr"], m["ms_p50"], m["ms_p99"], m["build_ms"], m["false_abstain"]]
            )
    headers = ["dataset [protocol]", "n"] + [f"R@{k}" for k in KS] + [f"all@{k}" for k in KS]
    print_table(rows, [*headers, "MRR@10", "ms p50", "ms p99", "build ms", "false abst"])
    if abstain_rows:
        print()
        print_table(abstain_rows, ["irrelevance set", "n", "abstain (pool)", "abstain (cands)"])


if __name__ == "__main__":
    main()
