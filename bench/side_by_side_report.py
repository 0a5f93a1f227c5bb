"""`bench.side_by_side`'s results: medians over the rounds with their spread, Quiver / B2 ratios
per round, issue #33's targets, as plain-text and Markdown tables."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import print_table

LEVEL_METRICS = ("cpu_ms_per_run", "runs_per_s", "first_event_p50_ms", "first_token_p50_ms")
TTFT_ADDED_MS = 3.0
"""Time to first token alone: at most this much over the direct stream (immediate model)."""


def _median(values: list[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": _median(values),
        "min": min(values, default=0.0),
        "max": max(values, default=0.0),
    }


def _ratio(value: float, base: float) -> float:
    return value / base if base else 0.0


def round_ratios(r: dict[str, Any], index: int, name: str = "Quiver") -> dict[str, float]:
    """Quiver / B2 in one round: CPU per run and first token p50 at each level and model, and
    what the time to first token alone adds to the direct stream's (ms)."""
    raw, ttft = r["levels_raw"], r["ttft_raw"]
    out: dict[str, float] = {}
    for model in r["models"]:
        for n in map(str, r["levels"]):
            q, b2 = raw[name][model][n][index], raw["B2"][model][n][index]
            out[f"{model} CPU@{n}"] = _ratio(q["cpu_ms_per_run"], b2["cpu_ms_per_run"])
            out[f"{model} token@{n}"] = _ratio(q["first_token_p50_ms"], b2["first_token_p50_ms"])
        direct = ttft["direct"][model][index]["ttft_p50_ms"]
        out[f"{model} TTFT +ms"] = ttft[name][model][index]["ttft_p50_ms"] - direct
        out[f"{model} B2 TTFT +ms"] = ttft["B2"][model][index]["ttft_p50_ms"] - direct
    return out


def print_round(r: dict[str, Any], index: int) -> None:
    """One round's Quiver / B2 ratios, printed as soon as the round is done."""
    ratios = round_ratios(r, index)
    load = r["load_avg"][-1][0]
    cells = [f"{k} {v:+.1f}" if "+ms" in k else f"{k} {v:.2f}x" for k, v in ratios.items()]
    print(f"round {index + 1} (load {load:.1f}): Quiver/B2 " + ", ".join(cells), flush=True)


def summarise(r: dict[str, Any]) -> None:
    """Medians with spread (`gateways`, `ttft`), per-round ratios and the targets, into `r`."""
    r["gateways"] = {
        name: {
            model: {
                n: {
                    **{k: _median([s[k] for s in samples]) for k in LEVEL_METRICS},
                    "spread": {k: _spread([s[k] for s in samples]) for k in LEVEL_METRICS},
                    "errors": float(sum(s["errors"] for s in samples)),
                }
                for n, samples in by_level.items()
            }
            for model, by_level in by_model.items()
        }
        for name, by_model in r["levels_raw"].items()
    }
    r["ttft"] = {
        name: {
            model: {
                "ttft_p50_ms": _median([s["ttft_p50_ms"] for s in samples]),
                "spread": _spread([s["ttft_p50_ms"] for s in samples]),
                "errors": float(sum(s["errors"] for s in samples)),
            }
            for model, samples in by_model.items()
        }
        for name, by_model in r["ttft_raw"].items()
    }
    r["round_ratios"] = [round_ratios(r, i) for i in range(r["rounds"])]
    r["targets"] = targets_met(r)


def _rounds(r: dict[str, Any], key: str, unit: str = "x") -> str:
    values = [x[key] for x in r["round_ratios"]]
    if unit == "x":
        return " / ".join(f"{v:.2f}x" for v in values)
    return " / ".join(f"{v:+.1f}" for v in values)


def targets_met(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue #33's chat targets as rows: (what, Quiver's value with the rounds', pass/fail)."""
    g, t = r["gateways"], r["ttft"]
    rows: list[dict[str, Any]] = []
    # `--levels ""` measures the time to first token alone: no burst rows then.
    top = str(max(r["levels"], default=""))

    def against_b2(what: str, metric: str, model: str, n: str, key: str, fmt: str) -> None:
        q, b2 = g["Quiver"][model][n][metric], g["B2"][model][n][metric]
        ratio = _ratio(q, b2)
        rows.append(
            {
                "target": f"{what} at {n} at once ≤ B2 ({model} model)",
                "value": f"{ratio:.2f}x ({q:{fmt}} vs {b2:{fmt}} ms); rounds {_rounds(r, key)}",
                "pass": ratio <= 1.0,
            }
        )

    for model in r["models"] if top else ():
        against_b2(
            "first token p50", "first_token_p50_ms", model, top, f"{model} token@{top}", ".0f"
        )
    for model in r["models"]:
        for n in map(str, r["levels"]):
            against_b2("gateway CPU per run", "cpu_ms_per_run", model, n, f"{model} CPU@{n}", ".1f")
    if "immediate" in r["models"]:
        quiver, base = t["Quiver"]["immediate"], t["direct"]["immediate"]
        added = quiver["ttft_p50_ms"] - base["ttft_p50_ms"]
        b2 = t["B2"]["immediate"]["ttft_p50_ms"] - base["ttft_p50_ms"]
        rows.append(
            {
                "target": f"time to first token alone ≤ direct + {TTFT_ADDED_MS:g} ms "
                "(immediate model)",
                "value": f"+{added:.1f} ms ({quiver['ttft_p50_ms']:.1f} vs "
                f"{base['ttft_p50_ms']:.1f} ms; B2 {b2:+.1f}); rounds "
                f"{_rounds(r, 'immediate TTFT +ms', 'ms')} ms",
                "pass": added <= TTFT_ADDED_MS,
            }
        )
    errors = sum(v["errors"] for m in g["Quiver"].values() for v in m.values())
    errors += sum(v["errors"] for v in t["Quiver"].values())
    rows.append({"target": "0 errors (Quiver)", "value": f"{errors:.0f}", "pass": errors == 0})
    return rows


def table(r: dict[str, Any]) -> list[list[Any]]:
    """One row per metric, level and model; one column per path (medians, x B2, and the
    rounds' min..max)."""
    names = list(r["gateways"])
    g, t = r["gateways"], r["ttft"]
    rows: list[list[Any]] = []
    labels = {
        "cpu_ms_per_run": ("gateway CPU per run", "ms", ".1f"),
        "runs_per_s": ("runs/s", "", ".0f"),
        "first_event_p50_ms": ("first event p50", "ms", ".0f"),
        "first_token_p50_ms": ("first token p50", "ms", ".0f"),
    }
    for metric, (label, unit, fmt) in labels.items():
        for model in r["models"]:
            for n in map(str, r["levels"]):
                b2 = g["B2"][model][n][metric]
                cells = []
                for x in names:
                    m = g[x][model][n]
                    cell = format(m[metric], fmt)
                    if metric != "runs_per_s" and b2:
                        cell += f" ({m[metric] / b2:.2f}x)"
                    lo, hi = m["spread"][metric]["min"], m["spread"][metric]["max"]
                    if r["rounds"] > 1:
                        cell += f" [{format(lo, fmt)}..{format(hi, fmt)}]"
                    cells.append(cell)
                rows.append([f"{label}, {n} at once, {model} ({unit or 'per s'})", *cells])
    for model in r["models"]:
        base = t["direct"][model]["ttft_p50_ms"]
        cells = []
        for x in names:
            m = t[x][model]
            lo, hi = m["spread"]["min"], m["spread"]["max"]
            cell = f"{m['ttft_p50_ms']:.1f} ({m['ttft_p50_ms'] - base:+.1f})"
            if r["rounds"] > 1:
                cell += f" [{lo:.1f}..{hi:.1f}]"
            cells.append(cell)
        rows.append([f"time to first token alone, {model} (ms; direct {base:.1f})", *cells])
    rows.append(
        ["errors"]
        + [
            f"{sum(v['errors'] for m in g[x].values() for v in m.values()):.0f}"
            f" + {sum(v['errors'] for v in t[x].values()):.0f}"
            for x in names
        ]
    )
    return rows


def _rounds_table(r: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    keys = list(r["round_ratios"][0]) if r["round_ratios"] else []
    rows = []
    for i, ratios in enumerate(r["round_ratios"]):
        load = r["load_avg"][i + 1][0] if len(r["load_avg"]) > i + 1 else 0.0
        cells = [f"{v:+.1f}" if "+ms" in k else f"{v:.2f}x" for k, v in ratios.items()]
        rows.append([f"{i + 1} (load {load:.1f})", *cells])
    return ["round", *keys], rows


def print_results(r: dict[str, Any], *, markdown: bool = False) -> None:
    names = list(r["gateways"])
    print(
        f"{r['rounds']} round(s), path order shuffled every iteration (seed {r['seed']}), "
        f"medians [min..max over rounds]; {r['reply_words']} words {r['token_delay_ms']:.0f} ms "
        f"apart; LiteLLM: {r['litellm']}; load average at start {r['load_avg'][0][0]:.1f}"
    )
    print_table(table(r), ["per run", *names])
    print()
    headers, rows = _rounds_table(r)
    print("Quiver / B2 per round (TTFT: ms over direct)")
    print_table(rows, headers)
    print()
    print_table(
        [[row["target"], row["value"], "pass" if row["pass"] else "FAIL"] for row in r["targets"]],
        ["target (issue #33)", "Quiver", "status"],
    )
    if markdown:
        print()
        print(to_markdown(r))


def to_markdown(r: dict[str, Any]) -> str:
    names = list(r["gateways"])
    lines = ["| per run, medians [min..max over rounds] | " + " | ".join(names) + " |"]
    lines.append("|---|" + "---:|" * len(names))
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in table(r)]
    headers, rows = _rounds_table(r)
    lines += ["", "| " + " | ".join(headers) + " |", "|---|" + "---:|" * (len(headers) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", "| target (issue #33) | Quiver | status |", "|---|---|---|"]
    lines += [
        f"| {row['target']} | {row['value']} | {'pass' if row['pass'] else 'FAIL'} |"
        for row in r["targets"]
    ]
    return "\n".join(lines)
