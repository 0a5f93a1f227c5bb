"""Small helpers shared by the benchmarks: percentiles and a plain-text table."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATA_ENV = "QUIVER_BENCH_DATA"
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def bench_data_dir(*required: str) -> Path:
    """The benchmark datasets: `$QUIVER_BENCH_DATA`, else `../shared/data` beside the repository.

    They are not part of the repository. When the folder (or one of the `required` paths inside
    it) is missing, the benchmark stops with exit status 2 and one line saying where it looked.
    """
    env = os.environ.get(DATA_ENV)
    root = Path(env) if env else DEFAULT_DATA
    missing = [root / r for r in required if not (root / r).exists()]
    if not root.is_dir() or missing:
        where = f"${DATA_ENV}={env}" if env else f"{DEFAULT_DATA} (set ${DATA_ENV} to override)"
        what = ", ".join(str(m) for m in missing) if missing else str(root)
        sys.stderr.write(f"bench: dataset not found: {what}; expected under {where}\n")
        raise SystemExit(2)
    return root


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0.0 for an empty sequence."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def print_table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> None:
    """Print rows under headers, columns padded to their widest cell."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=False))
            )
        )
