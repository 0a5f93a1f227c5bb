"""`bench.side_by_side`'s summary: medians, per-round ratios and issue #33's targets, from raw
results of the shape `_run` collects (with bursts, and for the time to first token alone)."""

from __future__ import annotations

from typing import Any

from bench.side_by_side_report import summarise

PATHS = ("direct", "B2", "Quiver")


def _level(cpu: float, token: float) -> dict[str, float]:
    return {
        "cpu_ms_per_run": cpu,
        "runs_per_s": 100.0,
        "first_event_p50_ms": token / 2,
        "first_token_p50_ms": token,
        "errors": 0,
    }


def _raw(levels: list[int], ttft: dict[str, list[float]]) -> dict[str, Any]:
    rounds = len(ttft["direct"])
    return {
        "rounds": rounds,
        "levels": levels,
        "models": ["immediate"],
        "levels_raw": {
            name: {
                "immediate": {
                    str(n): [_level(4.0 if name == "Quiver" else 8.0, 300.0) for _ in range(rounds)]
                    for n in levels
                }
            }
            for name in ("B2", "Quiver")
        },
        "ttft_raw": {
            name: {"immediate": [{"ttft_p50_ms": v, "errors": 0} for v in ttft[name]]}
            for name in PATHS
        },
    }


def test_time_to_first_token_alone_without_bursts() -> None:
    r = _raw([], {"direct": [2.0, 2.2], "B2": [6.4, 6.8], "Quiver": [4.5, 5.5]})
    summarise(r)
    targets = {t["target"]: t for t in r["targets"]}
    alone = targets["time to first token alone ≤ direct + 3 ms (immediate model)"]
    assert alone["value"].startswith("+2.9 ms (5.0 vs 2.1 ms; B2 +4.5); rounds +2.5 / +3.3")
    assert alone["pass"]
    assert not any("at once" in name for name in targets)  # no burst was measured


def test_bursts_are_held_against_b2_at_the_top_level() -> None:
    r = _raw([50, 200], {"direct": [2.0], "B2": [6.0], "Quiver": [9.0]})
    summarise(r)
    targets = {t["target"]: t for t in r["targets"]}
    assert targets["first token p50 at 200 at once ≤ B2 (immediate model)"]["pass"]
    cpu = targets["gateway CPU per run at 50 at once ≤ B2 (immediate model)"]
    assert cpu["value"].startswith("0.50x")
    assert cpu["pass"]
    assert not targets["time to first token alone ≤ direct + 3 ms (immediate model)"]["pass"]
    assert r["round_ratios"] == [
        {
            "immediate CPU@50": 0.5,
            "immediate token@50": 1.0,
            "immediate CPU@200": 0.5,
            "immediate token@200": 1.0,
            "immediate TTFT +ms": 7.0,
            "immediate B2 TTFT +ms": 4.0,
        }
    ]
