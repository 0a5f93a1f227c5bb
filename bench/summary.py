"""The suite's summary table: one row per headline number, with its target from the issues."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Row = list[str]


def _fmt(value: float, unit: str = "") -> str:
    if isinstance(value, int):
        return f"{value:,}{unit}"
    if abs(value) >= 100:
        text = f"{value:,.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return f"{text}{unit}"


def _row(
    metric: str,
    value: float,
    unit: str = "",
    *,
    le: float | None = None,
    eq: float | None = None,
    target: str = "",
) -> Row:
    status = ""
    if le is not None:
        status = "pass" if value <= le else "miss"
        target = target or f"≤ {_fmt(le, unit)}"
    elif eq is not None:
        status = "pass" if value == eq else "miss"
        target = target or f"= {_fmt(eq, unit)}"
    return [metric, _fmt(value, unit), target, status]


def pipeline(r: dict[str, Any]) -> list[Row]:
    rows = []
    base = r["scale_1"]
    rows.append(_row("tokens: progressive / legacy (1x)", base["ratio_pct"], "%", le=2.0))
    for key, m in r.items():
        scale = key.removeprefix("scale_")
        rows.append(
            _row(
                f"tokens {scale}x: progressive (prompt+tools)",
                m["progressive_tokens"],
                target=f"{m['progressive_prompt_tokens']}+{m['progressive_tool_tokens']}",
            )
        )
        rows.append(
            _row(
                f"tokens {scale}x: legacy (prompt+tools)",
                m["legacy_tokens"],
                target=f"{m['legacy_prompt_tokens']}+{m['legacy_tool_tokens']}",
            )
        )
        if scale != "1":
            rows.append(
                _row(
                    f"growth {scale}x: progressive / legacy",
                    m["progressive_growth"],
                    "x",
                    target=f"legacy {_fmt(m['legacy_growth'], 'x')}",
                )
            )
    rows.append(_row("assembly p50 (1x)", base["assembly_p50_ms"], " ms", le=2.0))
    rows.append(_row("assembly p99 (1x)", base["assembly_p99_ms"], " ms", le=10.0))
    for key, m in r.items():
        if key != "scale_1":
            rows.append(
                _row(
                    f"assembly p50/p99 ({key.removeprefix('scale_')}x)",
                    m["assembly_p50_ms"],
                    " ms",
                    target=f"p99 {_fmt(m['assembly_p99_ms'], ' ms')}",
                )
            )
    return rows


def token_kinds(r: dict[str, Any]) -> list[Row]:
    return [
        _row(
            f"tokens per kind: {kind} progressive / legacy",
            m["ratio_pct"],
            "%",
            target=f"{m['progressive']} / {m['legacy']} tokens",
        )
        for kind, m in r.items()
        if isinstance(m, dict)
    ]


def selection(r: dict[str, Any]) -> list[Row]:
    rows = []
    for dataset, protocols in r.items():
        if dataset == "split":
            continue
        for proto, m in protocols.items():
            if proto.endswith("irrelevance"):
                rows.append(_row(f"{dataset} [{proto}]: abstain share", m["abstain_pool"]))
                continue
            name = f"{dataset} [{proto}]"
            recall = " / ".join(f"{m[f'recall@{k}']:.3f}" for k in (3, 6, 10))
            gold = " / ".join(f"{m[f'all_gold@{k}']:.3f}" for k in (3, 6, 10))
            rows.append([f"{name} recall@3/6/10", recall, "", ""])
            rows.append([f"{name} all-gold@3/6/10", gold, "", ""])
            rows.append(
                [
                    f"{name} MRR; ms p50/p99",
                    f"{m['mrr']:.3f}",
                    f"{m['ms_p50']:.2f} / {m['ms_p99']:.2f} ms",
                    "",
                ]
            )
    return rows


def chat_overhead(r: dict[str, Any]) -> list[Row]:
    rows = [
        _row("gateway added time-to-first-token p50", r["added_first_token_p50_ms"], " ms", le=5.0),
        _row("gateway added time-to-first-event p50", r["added_first_event_p50_ms"], " ms"),
        _row(
            "gateway time-to-first-token p50 / direct",
            r["gateway_first_token"]["p50_ms"],
            " ms",
            target=f"direct {_fmt(r['direct_first_token']['p50_ms'], ' ms')}",
        ),
        _row(
            "gateway time-to-first-token p99 / direct",
            r["gateway_first_token"]["p99_ms"],
            " ms",
            target=f"direct {_fmt(r['direct_first_token']['p99_ms'], ' ms')}",
        ),
    ]
    for key, m in r["dispatch"].items():
        if isinstance(m, dict):
            rows.append(
                _row(
                    f"meta-tool dispatch {key} p50",
                    m["p50_us"],
                    " µs",
                    target=f"p99 {_fmt(m['p99_us'], ' µs')}",
                )
            )
    return rows


def connector_overhead(r: dict[str, Any]) -> list[Row]:
    return [_row("connector execute / direct httpx p50", r["ratio_p50"], "x", le=1.3)]


def sql_safety(r: dict[str, Any]) -> list[Row]:
    rows = []
    for dialect, m in r["overhead"].items():
        le = 1.2 if dialect == "postgresql" else None
        rows.append(_row(f"DB query / raw driver p50 ({dialect})", m["ratio"], "x", le=le))
        if "memoised_ratio" in m:
            rows.append(
                _row(
                    f"DB query / raw driver p50 ({dialect}, check memoised)",
                    m["memoised_ratio"],
                    "x",
                    le=le,
                )
            )
    for dialect, m in r["validation"].items():
        rows.append(_row(f"SQL check p50 ({dialect})", m["p50_us"], " µs"))
    return rows


def mcp_overhead(r: dict[str, Any]) -> list[Row]:
    return [
        _row(f"MCP pool call / direct p50 ({transport})", m["ratio_p50"], "x", le=1.2)
        for transport, m in r.items()
        if isinstance(m, dict) and "ratio_p50" in m
    ]


def cancel(r: dict[str, Any]) -> list[Row]:
    return [
        _row(f"cancel → {kind} call stopped p95", m["stopped_p95_ms"], " ms", le=r["target_ms"])
        for kind, m in r.items()
        if isinstance(m, dict) and "stopped_p95_ms" in m
    ]


def mcp_endpoint(r: dict[str, Any]) -> list[Row]:
    t, c = r["tokens"], r["call"]
    rows = [
        _row("MCP endpoint tools/list tokens (progressive)", t["progressive"]["tools_list_tokens"]),
        _row("MCP endpoint tools/list tokens (flat)", t["flat"]["tools_list_tokens"]),
        _row("MCP endpoint tools/list saving", t["tools_list_saving_pct"], "%"),
    ]
    if "paths" in c:  # side by side with the peers (bench.mcp_calls)
        rows += mcp_calls(c)
    elif "endpoint" not in c:  # results from before the admin route was measured
        return [*rows, _row("MCP endpoint tools/call / direct p50", c["ratio_p50"], "x", le=1.2)]
    for key, m in r.get("sessions", {}).items():
        if isinstance(m, dict):
            rows.append(
                _row(
                    f"MCP endpoint {key} sessions held: RSS per session",
                    m["rss_per_session_kib"],
                    " KiB",
                    target=f"{m['call_errors']} call errors; "
                    f"{m.get('open_cpu_ms_per_session', 0):.1f} ms CPU per open",
                )
            )
    return rows


def mcp_calls(c: dict[str, Any]) -> list[Row]:
    """One `tools/call` per path (medians over rounds), then issue #33's targets."""
    paths, labels = c["paths"], c["labels"]
    rows = [
        _row(
            f"MCP call p50 via {labels[name]}",
            m["p50_ms"],
            " ms",
            target=f"CPU {_fmt(m['cpu_ms_per_call'], ' ms')}/call",
        )
        for name, m in sorted(paths.items(), key=lambda kv: kv[1]["p50_ms"])
    ]
    for name, reason in c.get("peers", {}).items():
        if reason != "ok":
            rows.append([f"MCP peer {name}", "left out", reason[:80], ""])
    for t in c["targets"]:
        low, high = t["spread"]
        rows.append(
            [
                t["target"],
                f"{t['ratio']:.2f}x ({low:.2f}-{high:.2f})",
                "" if "admin" in t["target"] else "<= 1x",
                "pass" if t["pass"] else "miss",
            ]
        )
    return rows


def llm_stream(r: dict[str, Any]) -> list[Row]:
    return [
        _row("LlmClient added TTFT p50 vs raw aiohttp", r["overhead_ttft_p50_ms"], " ms"),
        _row("LlmClient added total p50 vs raw aiohttp", r["overhead_total_p50_ms"], " ms"),
    ]


def load(r: dict[str, Any]) -> list[Row]:
    rows = []
    for key, m in r.items():
        if not isinstance(m, dict):
            continue
        label = f"load {key} ({m['database']})" if key == "soak" else f"load {m['concurrency']}"
        rows.append(_row(f"{label}: errors", m["errors"], eq=0))
        rows.append(
            _row(
                f"{label}: runs/s; events/s",
                m["runs_per_s"],
                target=f"{_fmt(m['events_per_s'])} events/s",
            )
        )
        rows.append(
            _row(
                f"{label}: first event p50",
                m["ttfe_p50_ms"],
                " ms",
                target=f"p99 {_fmt(m['ttfe_p99_ms'], ' ms')}",
            )
        )
        rows.append(
            _row(
                f"{label}: event gap p50",
                m["gap_p50_ms"],
                " ms",
                target=f"p99 {_fmt(m['gap_p99_ms'], ' ms')}",
            )
        )
        rows.append(
            _row(
                f"{label}: run p50",
                m["run_p50_ms"],
                " ms",
                target=f"p99 {_fmt(m['run_p99_ms'], ' ms')}",
            )
        )
        if "rss_per_stream_kib" in m:
            rows.append(
                _row(
                    f"{label}: RSS per open stream",
                    m["rss_per_stream_kib"],
                    " KiB",
                    target=f"{m['peak_open']} open",
                )
            )
        if "rss_growth_pct" in m:
            rows.append(
                _row(f"{label}: RSS growth after warm-up", m["rss_growth_pct"], "%", le=10.0)
            )
    return rows


def workers(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [["workers: 1 vs 2", "—", str(r["skipped"])[:80], ""]]
    n = r["concurrency"]
    rows = []
    for w in (1, 2):
        m = r[f"workers_{w}"]
        rows.append(_row(f"workers={w}: runs/s at {n} concurrent", m["runs_per_s"]))
        rows.append(_row(f"workers={w}: gateway CPU per run", m["cpu_per_run_ms"], " ms"))
        rows.append(_row(f"workers={w}: errors", m["errors"], eq=0))
    rows.append(_row("workers: runs/s 2 vs 1", r["speedup"], "x"))
    return rows


def side_by_side(r: dict[str, Any]) -> list[Row]:
    rows = [
        [f"side by side: {t['target']}", t["value"], "", "pass" if t["pass"] else "miss"]
        for t in r["targets"]
    ]
    for name, models in r["gateways"].items():
        for model, levels in models.items():
            cpu = " / ".join(_fmt(m["cpu_ms_per_run"]) for m in levels.values())
            rps = " / ".join(_fmt(m["runs_per_s"]) for m in levels.values())
            rows.append(
                [
                    f"side by side: {name} CPU ms per run @ {'/'.join(levels)} ({model})",
                    cpu,
                    f"{rps} runs/s",
                    "",
                ]
            )
    return rows


def cold_catalog(r: dict[str, Any]) -> list[Row]:
    return [
        [f"cold catalog: {t['target']}", t["value"], "", "pass" if t["pass"] else "miss"]
        for t in r["targets"]
    ]


def knowledge(r: dict[str, Any]) -> list[Row]:
    hybrid = r["hybrid"]
    return [
        _row("knowledge: recall@5 (hybrid)", hybrid["recall_at_5"], target="≥ 0.9"),
        _row("knowledge: recall@1 (hybrid)", hybrid["recall_at_1"]),
        _row("knowledge: off-topic answered", hybrid["off_topic_answered_rate"], le=0.1),
        _row("knowledge: query CPU p50", hybrid["query_cpu_p50_ms"], " ms"),
    ]


BUILDERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "pipeline": pipeline,
    "token_kinds": token_kinds,
    "selection": selection,
    "knowledge": knowledge,
    "chat_overhead": chat_overhead,
    "connector_overhead": connector_overhead,
    "sql_safety": sql_safety,
    "mcp_overhead": mcp_overhead,
    "cancel": cancel,
    "mcp_endpoint": mcp_endpoint,
    "llm_stream": llm_stream,
    "load": load,
    "workers": workers,
    "side_by_side": side_by_side,
    "cold_catalog": cold_catalog,
}


def summary_rows(benchmarks: dict[str, dict[str, Any]]) -> list[Row]:
    rows: list[Row] = []
    for name, outcome in benchmarks.items():
        if not outcome.get("ok"):
            rows.append([f"{name}", "—", str(outcome.get("error", ""))[:80], "ERROR"])
            continue
        try:
            rows.extend(BUILDERS[name](outcome["result"]))
        except (KeyError, TypeError, ValueError) as exc:
            rows.append([f"{name}", "—", f"unexpected result shape: {exc!r}"[:80], "ERROR"])
    return rows
