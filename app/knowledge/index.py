"""Hybrid search over chunks: the tool ranker's BM25F scorer and WordLlama embeddings
(`app/retrieval/`), fused for the order, with an absolute score for the threshold.

The order is the fusion of z-normalised lexical and cosine scores (as the hybrid tool ranker
does). Z-scores are relative to the candidates, so they cannot say "nothing here is
relevant"; each hit's `score` is therefore absolute, in [0, 1]: the mean of the cosine
similarity and the share of the query's (idf-weighted) terms the chunk contains.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.retrieval.embedding import Embedder, from_bytes
from app.retrieval.fusion import fuse
from app.retrieval.lexical import FieldWeight, build_postings, query_terms, score
from app.retrieval.text import SYNONYMS, tokenize, words

LEXICAL_WEIGHT = 0.4
"""Share of the lexical z-score in the order (the rest is the embedding's); chosen on the
labelled questions of `bench/knowledge.py` (0.3-1.0 score alike, embeddings alone lower)."""
_FIELDS = (
    FieldWeight(weight=2.0, b=0.3),  # document name and heading path
    FieldWeight(weight=1.0, b=0.75),  # the chunk's text
)
_BIGRAM_WEIGHT = 0.5
_EXPANSION_WEIGHT = 0.5


def chunk_fields_text(document: str, heading: str, text: str) -> str:
    """What is embedded for a chunk: where it is, then what it says."""
    where = " ".join(words(document.rsplit(".", 1)[0]))
    return f"{where}. {heading}. {text}" if heading else f"{where}. {text}"


@dataclass(frozen=True, slots=True)
class IndexedChunk:
    knowledge_base_id: uuid.UUID
    document_id: uuid.UUID
    document: str
    heading: str
    position: int
    offset: int
    text: str


@dataclass(frozen=True, slots=True)
class Hit:
    chunk: IndexedChunk
    score: float
    """Absolute relevance in [0, 1] (what `min_score` is compared with)."""


class ChunkIndex:
    """Built once per set of documents (the search back-end caches it), queried many times."""

    def __init__(
        self,
        chunks: Sequence[IndexedChunk],
        embeddings: Sequence[bytes],
        *,
        lexical_weight: float = LEXICAL_WEIGHT,
    ) -> None:
        self.chunks = list(chunks)
        self.lexical_weight = lexical_weight
        fields = [
            (tokenize(f"{c.document.rsplit('.', 1)[0]} {c.heading}"), tokenize(c.text))
            for c in chunks
        ]
        self._postings = build_postings(
            fields, _FIELDS, bigram_fields=len(_FIELDS), bigram_weight=_BIGRAM_WEIGHT
        )
        self._matrix = from_bytes(embeddings)

    def __len__(self) -> int:
        return len(self.chunks)

    def _coverage(self, tokens: Sequence[str]) -> npt.NDArray[np.float64]:
        """Per chunk: the idf-weighted share of the query's distinct terms it contains."""
        n = len(self.chunks)
        covered = np.zeros(n, dtype=np.float64)
        total = 0.0
        for term in set(tokens):
            posting = self._postings.get(term)
            df = 0 if posting is None else len(posting[0])
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            total += idf
            if posting is not None:
                covered[posting[0]] += idf
        return covered / total if total > 0 else covered

    def search(self, query: str, *, limit: int) -> list[Hit]:
        """The best `limit` chunks, best first."""
        n = len(self.chunks)
        if n == 0 or not query.strip():
            return []
        tokens = tokenize(query)
        weights = query_terms(
            tokens, self._postings, synonyms=SYNONYMS, expansion_weight=_EXPANSION_WEIGHT
        )
        lexical = score(self._postings, weights, n)
        vector = Embedder.embed_few([query])[0]
        similarity = (self._matrix @ vector).astype(np.float64)
        order_by = fuse(lexical, similarity, lexical_weight=self.lexical_weight)
        absolute = 0.5 * np.clip(similarity, 0.0, 1.0) + 0.5 * self._coverage(tokens)
        ranked = np.lexsort((np.arange(n), -order_by))[:limit]
        return [Hit(chunk=self.chunks[i], score=round(float(absolute[i]), 3)) for i in ranked]
