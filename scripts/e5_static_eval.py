"""Score a multilingual-e5-small static table as a fourth signal of the hybrid ranker (offline).

Not part of the app: the table (`scripts/distil_static.py --source e5`) was tried and not shipped
(README, "Tool selection and disclosure at scale"). This script loads it (the pruned XLM-R
Unigram vocabulary, after the model's per-character normalisation map), scores requests with
the hybrid ranker's signals (lexical, WordLlama, a MiniLM table, the e5 table: each z-normalised
per request, the request and its clauses as rows, as app/pipeline/hybrid.py does) and reports
MetaTool recall@6, MetaTool-multi all-gold@6 and BFCL live_multiple recall@6 (exact and family)
for a grid of weights.

    .venv/bin/python scripts/distil_static.py --corpus-out /tmp/even.jsonl --corpus-part even
    (build venv) scripts/distil_static.py --source e5 --refine /tmp/even.jsonl --drop-pcs 8 \\
        --out /tmp/e5_even.npz            # and a MiniLM table refined on the same corpus
    OPENBLAS_NUM_THREADS=1 .venv/bin/python scripts/e5_static_eval.py /tmp/e5_even.npz \\
        --minilm /tmp/minilm_even.npz --part tune-odd

`--part tune-odd` scores the tune half's odd positions (tables refined on its even ones);
`--part test` the benchmark's reported half, with `--weights` fixed beforehand.
"""

from __future__ import annotations

import argparse
import itertools
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

from app.pipeline.hybrid import FUSION, clause_spans, split_clauses, tool_text
from app.pipeline.static_model import MODEL_PATH, Ids, StaticModel
from app.retrieval.embedding import Embedder
from app.retrieval.fusion import znorm_rows
from bench.selection import base_names, data_dir, gold_units, load_tools, read_jsonl, split_queries

FILES = (
    ("metatool", "queries"),
    ("metatool", "queries_multi"),
    ("bfcl-live-multiple", "queries"),
)
_SPACES = re.compile(" {2,}")


class E5Table(StaticModel):
    """A table from `distil_static.py --source e5`: Unigram pieces instead of WordPiece."""

    _shared: ClassVar[StaticModel | None] = None

    def __init__(self, path: Path = MODEL_PATH) -> None:
        with np.load(path) as data:
            pieces = [str(p) for p in data["pieces"]]
            scores = [float(s) for s in data["piece_scores"]]
            self._scales = data["scales"].astype(np.float32)
            self._vectors = data["vectors"]
            self._normalise = {
                int(c): str(o) for c, o in zip(data["norm_from"], data["norm_to"], strict=True)
            }
            unk = int(data["unk"])
        self.vocab_size = len(pieces)
        self.dim = int(self._vectors.shape[1])
        tokenizer = Tokenizer(models.Unigram(list(zip(pieces, scores, strict=True)), unk_id=unk))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
            replacement="\u2581", prepend_scheme="always"
        )
        self._tokenizer = tokenizer
        self._skip = np.array([p in ("<s>", "<pad>", "</s>", "<unk>") for p in pieces])

    def ids(self, text: str) -> Ids:
        normalised = _SPACES.sub(" ", text[:2000].translate(self._normalise))
        raw = np.asarray(self._tokenizer.encode(normalised).ids, dtype=np.int64)
        kept: Ids = raw[~self._skip[raw]] if raw.size else raw
        return kept


def signals(e5: E5Table, minilm: StaticModel, part: str) -> dict[str, Any]:
    """Per file: (z-normalised [lexical, WordLlama, MiniLM, e5] rows, gold) per request."""
    from app.pipeline.ranker import LexicalRanker

    base = data_dir() / "selection"
    out: dict[str, Any] = {}
    for ds, name in FILES:
        queries = read_jsonl(base / ds / f"{name}.jsonl")
        tune_odd = part == "tune-odd"
        half = split_queries(queries, "tune")[1::2] if tune_odd else split_queries(queries, "test")
        half = [q for q in half if gold_units(q)]
        tools = load_tools(base / ds / "tools.jsonl")
        texts = [tool_text(t) for t in tools]
        lexical = LexicalRanker(tools)
        wordllama = Embedder.embed(texts)
        m_ids = [minilm.ids(t) for t in texts]
        m_idf = minilm.idf_weights(m_ids)
        m_tools = minilm.embed_ids(m_ids, m_idf)
        e_ids = [e5.ids(t) for t in texts]
        e_idf = e5.idf_weights(e_ids)
        e_tools = e5.embed_ids(e_ids, e_idf)
        rows = []
        for q in half:
            text = q["query"]
            clauses = split_clauses(text)
            parts = [text, *clauses]
            lex = [lexical.score_array(text)]
            lex += [lexical.score_array(c, names=False) for c in clauses]
            spans = clause_spans(text, clauses)
            ids = [minilm.ids(t) for t in parts] if spans is None else minilm.ids_spans(text, spans)
            sims = [
                np.stack(lex).astype(np.float32),
                Embedder.embed_few(parts) @ wordllama.T,
                minilm.embed_ids(ids, m_idf) @ m_tools.T,
                e5.embed_ids([e5.ids(t) for t in parts], e_idf) @ e_tools.T,
            ]
            rows.append(([znorm_rows(s.astype(np.float32)) for s in sims], gold_units(q)))
        out[f"{ds}/{name}"] = (rows, [t.name for t in tools], base_names(base / ds / "tools.jsonl"))
    return out


def score(data: dict[str, Any], weights: tuple[float, ...], whole: float) -> dict[str, float]:
    """MetaTool recall@6, MetaTool-multi all-gold@6, BFCL recall@6 exact and family."""
    out: dict[str, float] = {}
    for key, (rows, names, aliases) in data.items():
        recall = all_gold = family = 0.0
        for sims, units in rows:
            fused = sum(w * s for w, s in zip(weights, sims, strict=True))
            final = fused[0]
            if fused.shape[0] > 1:
                final = whole * final + (1 - whole) * fused[1:].max(axis=0)
            top = {names[i] for i in np.argsort(-final, kind="stable")[:6]}
            hits = sum(1 for unit in units if top & set(unit))
            recall += hits / len(units)
            all_gold += hits == len(units)
            bases = {aliases[n] for n in top}
            family += sum(1 for u in units if bases & {aliases[g] for g in u}) / len(units)
        n = max(1, len(rows))
        if key == "metatool/queries":
            out["MetaTool"] = recall / n
        elif key == "metatool/queries_multi":
            out["multi all-gold"] = all_gold / n
        else:
            out["BFCL exact"] = recall / n
            out["BFCL family"] = family / n
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("table", type=Path, help="e5 table (distil_static.py --source e5)")
    parser.add_argument("--minilm", type=Path, default=MODEL_PATH, help="MiniLM table")
    parser.add_argument("--part", choices=("tune-odd", "test"), default="tune-odd")
    parser.add_argument(
        "--weights", help="LEX,WORDLLAMA,MINILM,E5,WHOLE: score these only (else a grid)"
    )
    args = parser.parse_args()
    data = signals(E5Table(args.table), StaticModel(args.minilm), args.part)
    shipped = (FUSION.lexical, FUSION.wordllama, FUSION.minilm, 0.0, FUSION.whole)
    if args.weights:
        grid = [shipped, tuple(float(x) for x in args.weights.split(","))]
    else:
        grid = [shipped] + [
            w
            for w in itertools.product(
                (0.15, 0.25),
                (0, 0.15, 0.3, 0.45),
                (0, 0.25, 0.5, 0.75),
                (0, 0.25, 0.5, 0.75, 1.0),
                (0.65, 0.8),
            )
            if any(w[1:4])
        ]
    results = sorted(
        ((score(data, w[:4], w[4]), w) for w in grid), key=lambda r: -sum(r[0].values())
    )
    print(f"shipped weights {shipped}: {score(data, shipped[:4], shipped[4])}")  # noqa: T201
    for metrics, w in results[:15]:
        figures = " ".join(f"{k} {v:.3f}" for k, v in metrics.items())
        print(f"{w}: {figures} sum {sum(metrics.values()):.3f}")  # noqa: T201


if __name__ == "__main__":
    main()
