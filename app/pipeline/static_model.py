"""A static token-embedding model distilled from all-MiniLM-L6-v2, shipped in the repository.

`models/minilm_static.npz` holds one int8 vector (with a float16 scale) per WordPiece token of
MiniLM's vocabulary: each token run through the transformer on its own, mean-pooled, then
refined so that weighted means of tokens approach the transformer's embeddings of whole
requests, and reduced by PCA (scripts/distil_static.py built it offline; licence in
models/README.md). A text's
embedding is the weighted mean of its tokens' vectors, so embedding costs a tokenizer call and a
gather: microseconds, no transformer at run time, no network.

Token weights are the catalog's own inverse document frequency (`idf_weights`): a token that
appears in most tool texts ("get", "the", "##s") says little about which tool is meant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from threading import Lock
from typing import ClassVar

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

MODEL_PATH = Path(__file__).resolve().parent / "models" / "minilm_static.npz"
_MAX_TEXT_CHARS = 2000

Matrix = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]


def unit_rows(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Matrix = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return out


class StaticModel:
    """Tokenizer plus token table; load once per process with `StaticModel.shared()`."""

    _shared: ClassVar[StaticModel | None] = None
    _lock: ClassVar[Lock] = Lock()

    def __init__(self, path: Path = MODEL_PATH) -> None:
        with np.load(path) as data:
            vocab = [str(v) for v in data["vocab"]]
            # Kept as int8 (7.8 MB rather than 31 MB); rows are scaled when gathered.
            self._scales: npt.NDArray[np.float32] = data["scales"].astype(np.float32)
            self._vectors: npt.NDArray[np.int8] = data["vectors"]
        self.vocab_size = len(vocab)
        self.dim = int(self._vectors.shape[1])
        tokenizer = Tokenizer(
            models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]")
        )
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        self._tokenizer = tokenizer
        self._skip = np.zeros(self.vocab_size, dtype=bool)
        for special in ("[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"):
            if special in vocab:
                self._skip[vocab.index(special)] = True

    @classmethod
    def shared(cls) -> StaticModel:
        if cls._shared is None:
            with cls._lock:
                if cls._shared is None:
                    from threadpoolctl import threadpool_limits

                    # (tools x 256) by (256 x few) products are memory-bound: BLAS threads only
                    # add start-up and, on a shared machine, milliseconds of waiting.
                    threadpool_limits(limits=1, user_api="blas")
                    cls._shared = cls()
        return cls._shared

    @property
    def tokenizer(self) -> Tokenizer:
        """MiniLM's WordPiece tokenizer (the table's vocabulary)."""
        return self._tokenizer

    def ids(self, text: str) -> Ids:
        """Token ids of a text (special and unknown tokens dropped)."""
        raw = np.asarray(self._tokenizer.encode(text[:_MAX_TEXT_CHARS]).ids, dtype=np.int64)
        kept: Ids = raw[~self._skip[raw]] if raw.size else raw
        return kept

    def ids_spans(self, text: str, spans: Sequence[tuple[int, int]]) -> list[Ids]:
        """Token ids of the text, then of each character span of it, from a single encode."""
        end = max((b for _, b in spans), default=0)
        enc = self._tokenizer.encode(text[: max(_MAX_TEXT_CHARS, end)])
        raw = np.asarray(enc.ids, dtype=np.int64)
        if not raw.size:
            return [raw] * (1 + len(spans))
        keep = ~self._skip[raw]
        bounds = np.asarray(enc.offsets, dtype=np.int64)
        # Each text is cut at the same length as `ids` cuts it when encoded on its own.
        out = [raw[keep & (bounds[:, 1] <= _MAX_TEXT_CHARS)]]
        for a, b in spans:
            b = min(b, a + _MAX_TEXT_CHARS)
            out.append(raw[keep & (bounds[:, 0] >= a) & (bounds[:, 1] <= b)])
        return out

    def idf_weights(self, documents: Sequence[Ids]) -> npt.NDArray[np.float32]:
        """Per-token weight from the documents' frequencies (BM25's idf; unseen tokens get
        the highest weight, as a rare word would)."""
        df = np.zeros(self.vocab_size, dtype=np.float64)
        for ids in documents:
            if ids.size:
                df[np.unique(ids)] += 1.0
        n = float(len(documents))
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        if n == 0:
            idf[:] = math.log(2.0)
        out: npt.NDArray[np.float32] = idf.astype(np.float32)
        return out

    def embed_ids(self, id_lists: Sequence[Ids], weights: npt.NDArray[np.float32]) -> Matrix:
        """Unit-length weighted mean of each list's token vectors (zeros for an empty list)."""
        vectors = np.zeros((len(id_lists), self.dim), dtype=np.float32)
        for i, ids in enumerate(id_lists):
            if ids.size:
                vectors[i] = (weights[ids] * self._scales[ids]) @ self._vectors[ids].astype(
                    np.float32
                )
        return unit_rows(vectors)
