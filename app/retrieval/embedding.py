"""WordLlama static embeddings, loaded from the installed wheel only (no network, no hub).

The tool ranker (`pipeline/hybrid.py`) and knowledge retrieval (`knowledge/`) embed with the
same model, so a query vector compares with both; vectors are stored as float16 bytes
(`to_bytes` / `from_bytes`), which keeps a 256-dimension vector at 512 bytes in a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from threading import Lock
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]

EMBEDDING_DIM = 256
_MAX_TEXT_CHARS = 2000
_BATCH = 256


class Embedder:
    """The WordLlama model, loaded once per process from the installed package."""

    _model: ClassVar[Any] = None
    _lock: ClassVar[Lock] = Lock()

    @classmethod
    def model(cls) -> Any:
        if cls._model is None:
            with cls._lock:
                if cls._model is None:
                    import wordllama
                    from threadpoolctl import threadpool_limits
                    from wordllama import WordLlama

                    # A (tools x 256) by (256 x few) product is memory-bound: BLAS threads
                    # only add start-up and, on a shared machine, milliseconds of waiting.
                    threadpool_limits(limits=1, user_api="blas")

                    home = Path(wordllama.__file__).resolve().parent
                    cls._model = WordLlama.load(
                        dim=EMBEDDING_DIM, cache_dir=home, disable_download=True
                    )
        return cls._model

    @classmethod
    def embed(cls, texts: Sequence[str]) -> Matrix:
        """Unit-length rows, one per text (zeros for a text with no known token).

        Mean of each text's token vectors, text by text: the package's own batch call pads
        a batch to its longest text, which for long tool descriptions costs 100+ MB.
        """
        model = cls.model()
        table = model.embedding
        vectors = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            encoded = model.tokenizer.encode_batch(
                [t[:_MAX_TEXT_CHARS] for t in texts[start : start + _BATCH]],
                add_special_tokens=False,
            )
            for i, enc in enumerate(encoded, start=start):
                ids = np.asarray(enc.ids, dtype=np.int64)[np.asarray(enc.attention_mask) > 0]
                if ids.size:
                    vectors[i] = table[np.clip(ids, 0, table.shape[0] - 1)].mean(axis=0)
        return unit_rows(vectors)

    @classmethod
    def embed_few(cls, texts: Sequence[str]) -> Matrix:
        """`embed` for a handful of short texts (a request and its clauses).

        Encodes one text at a time: the tokenizer's batch call starts a thread pool, which
        costs milliseconds on a busy machine for what takes microseconds.
        """
        model = cls.model()
        table = model.embedding
        vectors = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = model.tokenizer.encode(text, add_special_tokens=False).ids
            if ids:
                vectors[i] = table[np.clip(ids, 0, table.shape[0] - 1)].mean(axis=0)
        return unit_rows(vectors)


def unit_rows(vectors: Matrix) -> Matrix:
    """Each row scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Matrix = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return out


def to_bytes(vector: Matrix) -> bytes:
    """One vector as little-endian float16 bytes (what a row stores)."""
    return np.asarray(vector, dtype="<f2").tobytes()


def from_bytes(blobs: Sequence[bytes], dim: int = EMBEDDING_DIM) -> Matrix:
    """Stored vectors back to a float32 matrix; a blob of the wrong size reads as zeros."""
    out = np.zeros((len(blobs), dim), dtype=np.float32)
    for i, blob in enumerate(blobs):
        if len(blob) == 2 * dim:
            out[i] = np.frombuffer(blob, dtype="<f2")
    return out
