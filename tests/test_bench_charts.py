"""`make bench` draws the documentation's charts from its results file."""

from __future__ import annotations

import json
from pathlib import Path

from bench.charts import write_charts


def _results(tmp_path: Path) -> Path:
    scale = {"progressive_tokens": 1157, "legacy_tokens": 58400}
    benchmarks = {
        "pipeline": {
            "ok": True,
            "result": {"scale_1": scale, "scale_4": {**scale, "legacy_tokens": 234206}},
        },
        "selection": {
            "ok": True,
            "result": {"metatool/queries": {"hybrid pool": {"recall@5": 0.79}}},
        },
        "load": {
            "ok": True,
            "result": {
                "soak": {
                    "rss_samples_mib": [[1.0, 240.0], [2.0, 241.5]],
                    "rss_growth_pct": 0.6,
                    "errors": 0,
                }
            },
        },
        "side_by_side": {"ok": False, "error": "timed out after 900 s"},
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"benchmarks": benchmarks}))
    return path


def test_a_chart_per_module_that_ran_and_none_for_one_that_failed(tmp_path: Path) -> None:
    out = tmp_path / "charts"
    written = write_charts(_results(tmp_path), out)
    assert sorted(p.name for p in written) == ["selection.svg", "soak.svg", "tokens.svg"]
    tokens = (out / "tokens.svg").read_text()
    assert tokens.startswith("<?xml")
    assert "<svg" in tokens
    assert "Tokens in every prompt" in tokens


def test_the_same_numbers_draw_the_same_bytes(tmp_path: Path) -> None:
    results = _results(tmp_path)
    first = {p.name: p.read_bytes() for p in write_charts(results, tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in write_charts(results, tmp_path / "b")}
    assert first == second
