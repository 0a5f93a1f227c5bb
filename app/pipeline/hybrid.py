"""Hybrid tool ranker (strategy `hybrid`): lexical scores fused with static word embeddings.

The embedding model is WordLlama's 256-dimension static model, whose weights ship inside the
`wordllama` wheel; it is loaded from the installed package only, never from the network. Per
request, the lexical (BM25F) scores and the cosine similarities are z-normalised across the
tools and fused (0.25 lexical + 0.75 embedding). A request of several clauses ("find X, then
do Y") is also scored clause by clause: the final score is 0.65 x the whole request's score
plus 0.35 x the best clause's, so a tool that fits one part well is not drowned by the rest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from threading import Lock
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.pipeline.ranker import (
    DEFAULT_ABSTAIN_THRESHOLD,
    CachedRanker,
    LexicalRanker,
    ScoredTool,
    schema_parameter_names,
)
from app.pipeline.text import words
from app.tools.base import ToolDef

Matrix = npt.NDArray[np.float32]
Vector = npt.NDArray[np.float64]

LEXICAL_WEIGHT = 0.25
EMBEDDING_WEIGHT = 0.75
WHOLE_WEIGHT = 0.65
CLAUSE_WEIGHT = 0.35
EMBEDDING_DIM = 256
_MAX_CLAUSES = 6
_MIN_CLAUSE_WORDS = 2
_CLAUSE_SPLIT = re.compile(
    r"[.;,!?]+\s+|[.;!?]+$|\s+(?:and then|and|then|also|as well as|plus)\s+|\s*/\s*",
    re.IGNORECASE,
)
_LEADING_JOINER = re.compile(r"^(?:and then|and|then|also|plus)\s+", re.IGNORECASE)
_DESCRIPTION_CHARS = 400
_MAX_TEXT_CHARS = 2000
_BATCH = 256


class _Embedder:
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
        return _unit_rows(vectors)

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
        return _unit_rows(vectors)


def _unit_rows(vectors: Matrix) -> Matrix:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Matrix = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return out


def split_clauses(query: str) -> list[str]:
    """The request's clauses (`. ; , and / then`), only those of at least two words."""
    parts = [_LEADING_JOINER.sub("", p.strip()) for p in _CLAUSE_SPLIT.split(query) if p.strip()]
    clauses = [p for p in parts if len(words(p)) >= _MIN_CLAUSE_WORDS]
    return clauses[:_MAX_CLAUSES] if len(clauses) > 1 else []


def tool_text(tool: ToolDef) -> str:
    """What is embedded for a tool: its name as words, description, parameter names."""
    params = " ".join(schema_parameter_names(tool.parameters))
    name = " ".join(words(tool.name))
    return f"{name}. {tool.description[:_DESCRIPTION_CHARS]} {params}".strip()


def _znorm(scores: Vector) -> Vector:
    std = float(scores.std())
    if std <= 1e-12:
        return np.zeros_like(scores)
    out: Vector = (scores - scores.mean()) / std
    return out


def _fuse(lexical: Vector, similarity: Vector) -> Vector:
    out: Vector = LEXICAL_WEIGHT * _znorm(lexical) + EMBEDDING_WEIGHT * _znorm(similarity)
    return out


class HybridRanker(CachedRanker):
    """Rank a fixed set of tools against free-text requests: lexical and embedding scores fused."""

    def __init__(
        self, tools: Sequence[ToolDef], *, abstain_threshold: float = DEFAULT_ABSTAIN_THRESHOLD
    ) -> None:
        super().__init__(tools, abstain_threshold=abstain_threshold)
        self.lexical = LexicalRanker(tools, abstain_threshold=abstain_threshold)
        self._matrix = _Embedder.embed([tool_text(t) for t in tools])

    def scores_and_lexical(self, query: str) -> tuple[Vector, Vector]:
        """(fused score per tool, lexical score per tool), in input order."""
        lexical = self.lexical.score_array(query)
        if not self._names or not query.strip():
            return lexical, lexical
        clauses = split_clauses(query)
        vectors = _Embedder.embed_few([query, *clauses])
        similarity = (self._matrix @ vectors.T).astype(np.float64)
        fused = _fuse(lexical, similarity[:, 0])
        if clauses:
            best = _fuse(self.lexical.score_array(clauses[0]), similarity[:, 1])
            for i, clause in enumerate(clauses[1:], start=2):
                part = _fuse(self.lexical.score_array(clause), similarity[:, i])
                np.maximum(best, part, out=best)
            fused = WHOLE_WEIGHT * fused + CLAUSE_WEIGHT * best
        return fused, lexical

    def scores(self, query: str) -> list[float]:
        return [float(x) for x in self.scores_and_lexical(query)[0]]

    def rank(self, query: str, k: int | None = None) -> list[ScoredTool]:
        """Tools best first (ties keep input order); `k` caps the length.

        A tool's `score` is the lexical one (0.0 = no lexical evidence) so the abstain
        threshold keeps its meaning; the order is the fused one.
        """
        fused, lexical = self.scores_and_lexical(query)
        n = len(fused)
        limit = n if k is None else max(0, min(k, n))
        if limit == 0:
            return []
        if limit < n:
            part = np.argpartition(-fused, limit - 1)[:limit]
            order = part[np.lexsort((part, -fused[part]))]
        else:
            order = np.lexsort((np.arange(n), -fused))
        return [ScoredTool(self._names[i], float(lexical[i])) for i in order.tolist()]

    def should_abstain(self, scored: Sequence[ScoredTool], threshold: float | None = None) -> bool:
        """True when nothing looks relevant (by the lexical evidence of the ranked tools)."""
        limit = self.abstain_threshold if threshold is None else threshold
        return not scored or max(s.score for s in scored) < limit
