"""Tool-selection quality and latency of the local rankers (lexical, hybrid) on the shared datasets.

Run: `.venv/bin/python -m bench.selection [--split test|tune|all] [--strategies lexical,hybrid]`
(more strategies for comparison: `hybrid-wordllama`, `hybrid-minilm`).
Data: `$QUIVER_BENCH_DATA` or `../shared/data` next to the repository. Every
`selection/<dataset>/queries*.jsonl` is scored against the matching `tools*.jsonl`
(`queries_x.jsonl` uses `tools_x.jsonl` when present, else `tools.jsonl`).

Protocols: `pool` ranks the whole tools file for every query (the protocol of the BM25 baselines in
the data README); `candidates` ranks only the tools the query's source row offered, when the file
has a `candidates` field. Irrelevance files (no gold) report the abstain rate instead of recall.

Split: the hybrid ranker's constants were tuned on the `tune` half of every query file (queries
at even positions); the default `test` half (odd positions) was not looked at while tuning, so
its figures are not fitted. `all` scores every query.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.pipeline.couse import HISTORY_CALLS, HISTORY_RUNS, CoUsePrior, CoUsePriors
from app.pipeline.hybrid import Fusion, HybridRanker
from app.pipeline.ranker import LexicalRanker, ScoredTool
from app.tools.base import ToolDef
from bench.common import bench_data_dir, percentile, print_table

KS = (3, 5, 6, 10)


class WordLlamaHybrid(HybridRanker):
    """The previous hybrid: lexical + WordLlama only (for comparison)."""

    fusion = Fusion(lexical=0.25, wordllama=0.75, minilm=0.0)


class MiniLmHybrid(HybridRanker):
    """Lexical + the distilled MiniLM static model only (for comparison)."""

    fusion = Fusion(lexical=0.25, wordllama=0.0, minilm=0.75)


Ranker = LexicalRanker | HybridRanker
RANKERS: dict[str, type[LexicalRanker] | type[HybridRanker]] = {
    "lexical": LexicalRanker,
    "hybrid": HybridRanker,
    "hybrid-wordllama": WordLlamaHybrid,
    "hybrid-minilm": MiniLmHybrid,
}
SPLITS = ("test", "tune", "all")


def split_queries(queries: list[dict[str, Any]], split: str) -> list[dict[str, Any]]:
    """`tune`: even positions (used to choose constants); `test`: odd positions; `all`."""
    if split == "all":
        return queries
    first = 0 if split == "tune" else 1
    return queries[first::2]


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


def _timed_rank(ranker: Ranker, query: str) -> tuple[list[ScoredTool], float]:
    start = time.perf_counter()
    scored = ranker.rank(query, k=max(KS))
    return scored, (time.perf_counter() - start) * 1000.0


def _subset_ranker(
    by_name: dict[str, ToolDef], kind: type[LexicalRanker] | type[HybridRanker]
) -> Callable[[Sequence[str]], Ranker]:
    def make(names: Sequence[str]) -> Ranker:
        return kind.cached([by_name[n] for n in names if n in by_name])

    return make


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def evaluate_file(
    queries: list[dict[str, Any]],
    tools: list[ToolDef],
    aliases: dict[str, str],
    kind: type[LexicalRanker] | type[HybridRanker] = LexicalRanker,
) -> dict[str, dict[str, float]]:
    """Metrics per protocol for one query file (recall files) or abstain rates (irrelevance)."""
    if issubclass(kind, HybridRanker):
        kind([])  # load the embedding models outside the timed build
    started = time.perf_counter()
    pool = kind(tools)
    build_ms = (time.perf_counter() - started) * 1000.0
    subset = _subset_ranker({t.name: t for t in tools}, kind)
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


def run(
    root: Path | None = None,
    *,
    split: str = "test",
    strategies: Sequence[str] = ("lexical", "hybrid"),
) -> dict[str, Any]:
    """Every selection dataset: {"<dataset>/<file>": {"<strategy> <protocol>": metrics}}."""
    base = (root or data_dir()) / "selection"
    if not base.is_dir():
        raise SystemExit(
            f"bench.selection: no selection data at {base}; set QUIVER_BENCH_DATA to the folder"
            " holding selection/<dataset>/"
        )
    results: dict[str, Any] = {"split": {"name": split}}
    rss_before = _rss_mb()
    for ds in sorted(p for p in base.iterdir() if (p / "tools.jsonl").exists()):
        for qpath in sorted(ds.glob("queries*.jsonl")):
            tpath = _tools_for(qpath)
            queries = split_queries(read_jsonl(qpath), split)
            tools, aliases = load_tools(tpath), base_names(tpath)
            per_file: dict[str, dict[str, float]] = {}
            for strategy in strategies:
                metrics = evaluate_file(queries, tools, aliases, RANKERS[strategy])
                per_file.update({f"{strategy} {proto}": m for proto, m in metrics.items()})
            results[f"{ds.name}/{qpath.stem}"] = per_file
    results["split"]["peak_rss_growth_mb"] = _rss_mb() - rss_before
    return results


SCALE_SIZES = (1_000, 10_000)
SCALE_QUERIES = 300
SCALE_COLUMNS = (
    "queries",
    "build_ms",
    "build_cpu_ms",
    "ms_p50",
    "ms_p99",
    "cpu_ms_p50",
    "cpu_ms_p99",
    "rss_growth_mb",
)


def _pooled_tools(base: Path) -> list[ToolDef]:
    """Every tool of every dataset, deduplicated by name."""
    seen: dict[str, ToolDef] = {}
    for path in sorted(base.glob("*/tools*.jsonl")):
        for tool in load_tools(path):
            seen.setdefault(tool.name, tool)
    return list(seen.values())


def _catalog(pool: list[ToolDef], size: int) -> list[ToolDef]:
    """`size` tools: the pool repeated with a copy number in each repeated name."""
    return [
        ToolDef(
            name=pool[i % len(pool)].name + (f"_{i // len(pool)}" if i >= len(pool) else ""),
            description=pool[i % len(pool)].description,
            parameters=pool[i % len(pool)].parameters,
        )
        for i in range(size)
    ]


def scale_timing(
    root: Path | None = None, strategies: Sequence[str] = ("lexical", "hybrid")
) -> dict[str, Any]:
    """Per-query latency, index build time and memory at 1,000 and 10,000 tools."""
    base = (root or data_dir()) / "selection"
    pool = _pooled_tools(base)
    queries = [
        q["query"]
        for path in sorted(base.glob("*/queries*.jsonl"))
        for q in read_jsonl(path)
        if gold_units(q)
    ][::7][:SCALE_QUERIES]
    out: dict[str, Any] = {}
    for strategy in strategies:  # models load once per process, outside the build timing
        RANKERS[strategy]([])
    for size in SCALE_SIZES:
        tools = _catalog(pool, size)
        for strategy in strategies:
            rss = _rss_mb()
            started, started_cpu = time.perf_counter(), time.process_time()
            ranker = RANKERS[strategy](tools)
            build_ms = (time.perf_counter() - started) * 1000.0
            build_cpu_ms = (time.process_time() - started_cpu) * 1000.0
            wall: list[float] = []
            cpu: list[float] = []
            for q in queries:
                start, start_cpu = time.perf_counter(), time.process_time()
                ranker.rank(q, k=max(KS))
                cpu.append((time.process_time() - start_cpu) * 1000.0)
                wall.append((time.perf_counter() - start) * 1000.0)
            out[f"{strategy} {size}"] = {
                "tools": size,
                "queries": len(queries),
                "build_ms": build_ms,
                "build_cpu_ms": build_cpu_ms,
                "ms_p50": percentile(wall, 50),
                "ms_p99": percentile(wall, 99),
                "cpu_ms_p50": percentile(cpu, 50),
                "cpu_ms_p99": percentile(cpu, 99),
                "rss_growth_mb": _rss_mb() - rss,
            }
            del ranker
    return out


COUSE_K = 6
COUSE_DEPTH = 40


def _recall(top: set[str], units: list[list[str]]) -> tuple[float, bool]:
    hits = sum(1 for unit in units if top & set(unit))
    return hits / len(units), hits == len(units)


def couse_eval(
    root: Path | None = None, *, split: str = "test", strategy: str = "hybrid"
) -> dict[str, dict[str, float]]:
    """The co-use prior (app/pipeline/couse.py) on MetaTool, fitted on the other half.

    Every MetaTool-multi request of the half not reported is taken as one past run that used
    its gold tools; the prior fitted on those runs re-ranks the reported half of MetaTool-multi
    and of the single-tool MetaTool set (`lowered` counts requests whose recall@6 it lowered).
    """
    base = (root or data_dir()) / "selection" / "metatool"
    fit_half = {"test": "tune", "tune": "test"}.get(split)
    if fit_half is None:
        raise SystemExit("bench.selection --couse: --split must be test or tune")
    multi = read_jsonl(base / "queries_multi.jsonl")
    prior = CoUsePrior(
        [[g for unit in gold_units(q) for g in unit] for q in split_queries(multi, fit_half)]
    )
    ranker = RANKERS[strategy](load_tools(base / "tools.jsonl"))
    out: dict[str, dict[str, float]] = {}
    for name, path in (("multi", "queries_multi.jsonl"), ("single", "queries.jsonl")):
        queries = [q for q in split_queries(read_jsonl(base / path), split) if gold_units(q)]
        sums = {"recall@6": 0.0, "all_gold@6": 0.0, "prior recall@6": 0.0}
        sums |= {"prior all_gold@6": 0.0, "lowered": 0.0, "raised": 0.0}
        for q in queries:
            units = gold_units(q)
            ranked = [s.name for s in ranker.rank(q["query"], k=COUSE_DEPTH)]
            before, before_all = _recall(set(ranked[:COUSE_K]), units)
            after, after_all = _recall(set(prior.fill(ranked, COUSE_K)[:COUSE_K]), units)
            sums["recall@6"] += before
            sums["all_gold@6"] += before_all
            sums["prior recall@6"] += after
            sums["prior all_gold@6"] += after_all
            sums["lowered"] += after < before
            sums["raised"] += after > before
        n = max(1, len(queries))
        out[f"metatool/{name} [{strategy}]"] = {
            "n": len(queries),
            **{k: v if k in ("lowered", "raised") else v / n for k, v in sums.items()},
        }
    return out


async def couse_history(
    *, agents: int = 20, runs_each: int = 1000, calls_per_run: int = 5, reads: int = 30
) -> dict[str, float]:
    """What fitting an agent's co-use prior from the tool-call audit costs in a run (Postgres).

    A throwaway database holds `agents` agents' audits of `runs_each` runs each; a cold read is
    `ToolHistory.run_tool_sets` (the newest `HISTORY_CALLS` calls, `HISTORY_RUNS` runs) plus the
    fit, which a run pays once per agent per TTL; a warm one is the cache hit every other run pays.
    """
    import random
    import uuid
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import insert

    from app.audit.history import ToolHistory
    from app.audit.models import ToolCall
    from app.db.engine import create_engine, create_sessionmaker
    from tests.fixtures.database import migrated_postgres

    rng = random.Random(7)
    tools = [f"tool_{i}" for i in range(60)]
    ids = [uuid.uuid4() for _ in range(agents)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    async with migrated_postgres({}) as settings:
        engine = create_engine(settings)
        try:
            sessions = create_sessionmaker(engine)
            for agent_id in ids:
                rows = [
                    {
                        "id": uuid.uuid4(),
                        "run_id": run_id,
                        "agent_id": agent_id,
                        "kind": "connector",
                        "name": name,
                        "arguments": {},
                        "ok": True,
                        "latency_ms": 1.0,
                        "created_at": start + timedelta(seconds=r * 10 + j),
                    }
                    for r, run_id in enumerate(uuid.uuid4() for _ in range(runs_each))
                    for j, name in enumerate(rng.sample(tools, calls_per_run))
                ]
                async with sessions() as session:
                    await session.execute(insert(ToolCall), rows)
                    await session.commit()
            history = ToolHistory(sessions)
            cold: list[float] = []
            for i in range(reads):
                began = time.perf_counter()
                sets = await history.run_tool_sets(
                    ids[i % agents], runs=HISTORY_RUNS, calls=HISTORY_CALLS
                )
                CoUsePrior(sets)
                cold.append((time.perf_counter() - began) * 1000)
            priors = CoUsePriors(history)
            await priors.prior(ids[0])
            warm: list[float] = []
            for _ in range(1000):
                began = time.perf_counter()
                await priors.prior(ids[0])
                warm.append((time.perf_counter() - began) * 1000)
        finally:
            await engine.dispose()
    return {
        "audit rows": agents * runs_each * calls_per_run,
        "runs read": len(sets),
        "cold ms p50": percentile(cold, 50),
        "cold ms p99": percentile(cold, 99),
        "warm us p50": percentile(warm, 50) * 1000,
    }


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.selection")
    parser.add_argument("--split", choices=(*SPLITS, "dev", "heldout", "both"), default=None)
    parser.add_argument(
        "--real", action="store_true", help="GitHub, Stripe, Twilio and Slack in one agent"
    )
    parser.add_argument("--strategies", default="lexical,hybrid")
    parser.add_argument("--scale", action="store_true", help="latency at 1,000 and 10,000 tools")
    parser.add_argument(
        "--couse", action="store_true", help="the co-use prior on MetaTool (fit on the other half)"
    )
    parser.add_argument(
        "--couse-history",
        action="store_true",
        help="cost of an agent's co-use prior from its tool-call audit (throwaway Postgres)",
    )
    return parser.parse_args()


def main() -> None:
    args = _args()
    if args.real:
        from bench.selection_real import main as real_main

        real_main(args.split or "dev")
        return
    args.split = args.split or "test"
    strategies = [s for s in args.strategies.split(",") if s]
    if args.couse_history:
        import asyncio

        cost = asyncio.run(couse_history())
        print_table([list(cost.values())], list(cost))
        return
    if args.couse:
        couse = couse_eval(split=args.split, strategy=strategies[-1])
        columns = ["n", "recall@6", "prior recall@6", "all_gold@6", "prior all_gold@6"]
        rows = [[key, *(m[c] for c in [*columns, "lowered", "raised"])] for key, m in couse.items()]
        print(f"split: {args.split} (prior fitted on the other half of MetaTool-multi)")
        print_table(rows, ["set [ranker]", *columns, "lowered", "raised"])
        return
    if args.scale:
        timing = scale_timing(strategies=strategies)
        rows = [[key, *(m[c] for c in SCALE_COLUMNS)] for key, m in timing.items()]
        headers = ["strategy tools", "queries", "build ms", "build cpu ms", "ms p50", "ms p99"]
        print_table(rows, [*headers, "cpu p50", "cpu p99", "RSS +MB"])
        return
    results = run(split=args.split, strategies=strategies)
    split = results.pop("split")
    print(f"split: {split['name']}; peak RSS growth {split['peak_rss_growth_mb']:.0f} MB")
    rows = []
    abstain_rows = []
    for key, protocols in results.items():
        for proto, m in protocols.items():
            if proto.endswith("irrelevance"):
                abstain_rows.append(
                    [f"{key} [{proto}]", m["n"], m["abstain_pool"], m["abstain_candidates"]]
                )
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
