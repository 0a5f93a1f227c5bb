"""Hybrid tool ranker (strategy `hybrid`): lexical scores fused with static word embeddings.

The embedding model is WordLlama's 256-dimension static model, whose weights ship inside the
`wordllama` wheel; it is loaded from the installed package only, never from the network. Per
request, the lexical (BM25F) scores and the cosine similarities are z-normalised across the
tools and fused (0.25 lexical + 0.75 embedding). A request of several clauses ("find X, then
do Y") is also scored clause by clause: the final score is 0.65 x the whole request's score
plus 0.35 x the best clause's, so a tool that fits one part well is not drowned by the rest.
"""

from __future__ import annotations

import heapq
import re
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from threading import Lock
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.pipeline.ranker import (
    DEFAULT_ABSTAIN_THRESHOLD,
    LexicalRanker,
    ScoredTool,
    schema_parameter_names,
)
from app.pipeline.text import words
from app.tools.base import ToolDef

Matrix = npt.NDArray[np.float32]

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
_DESCRIPTION_CHARS = 400
_CACHE_SIZE = 8


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
                    from wordllama import WordLlama

                    home = Path(wordllama.__file__).resolve().parent
                    cls._model = WordLlama.load(
                        dim=EMBEDDING_DIM, cache_dir=home, disable_download=True
                    )
        return cls._model

    @classmethod
    def embed(cls, texts: Sequence[str]) -> Matrix:
        """Unit-length rows, one per text (zeros for a text with no known token)."""
        if not texts:
            return np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
        vectors = np.asarray(cls.model().embed(list(texts), norm=False), dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        out: Matrix = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        return out


def split_clauses(query: str) -> list[str]:
    """The request's clauses (`. ; , and / then`), only those of at least two words."""
    parts = [p.strip() for p in _CLAUSE_SPLIT.split(query) if p and p.strip()]
    clauses = [p for p in parts if len(words(p)) >= _MIN_CLAUSE_WORDS]
    return clauses[:_MAX_CLAUSES] if len(clauses) > 1 else []


def tool_text(tool: ToolDef) -> str:
    """What is embedded for a tool: its name as words, description, parameter names."""
    params = " ".join(schema_parameter_names(tool.parameters))
    name = " ".join(words(tool.name))
    return f"{name}. {tool.description[:_DESCRIPTION_CHARS]} {params}".strip()


def _znorm(scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    std = float(scores.std())
    if std <= 1e-12:
        return np.zeros_like(scores)
    out: npt.NDArray[np.float64] = (scores - scores.mean()) / std
    return out


class HybridRanker:
    """Rank a fixed set of tools against free-text requests; build once, query many times."""

    abstain_threshold: float

    def __init__(
        self, tools: Sequence[ToolDef], *, abstain_threshold: float = DEFAULT_ABSTAIN_THRESHOLD
    ) -> None:
        self.abstain_threshold = abstain_threshold
        self._names = [t.name for t in tools]
        self.lexical = LexicalRanker(tools, abstain_threshold=abstain_threshold)
        self._matrix = _Embedder.embed([tool_text(t) for t in tools])

    def __len__(self) -> int:
        return len(self._names)

    def _fused(self, lexical: list[float], similarity: npt.NDArray[np.float64]) -> Any:
        lex = np.asarray(lexical, dtype=np.float64)
        return LEXICAL_WEIGHT * _znorm(lex) + EMBEDDING_WEIGHT * _znorm(similarity)

    def scores_and_lexical(self, query: str) -> tuple[list[float], list[float]]:
        """(fused score per tool, lexical score per tool), in input order."""
        lexical = self.lexical.scores(query)
        if not self._names or not query.strip():
            return list(lexical), lexical
        clauses = split_clauses(query)
        vectors = _Embedder.embed([query, *clauses])
        similarity = (self._matrix @ vectors.T).astype(np.float64)
        fused = self._fused(lexical, similarity[:, 0])
        if clauses:
            best = np.max(
                np.stack(
                    [
                        self._fused(self.lexical.scores(c), similarity[:, i + 1])
                        for i, c in enumerate(clauses)
                    ]
                ),
                axis=0,
            )
            fused = WHOLE_WEIGHT * fused + CLAUSE_WEIGHT * best
        return [float(x) for x in fused], lexical

    def scores(self, query: str) -> list[float]:
        return self.scores_and_lexical(query)[0]

    def rank(self, query: str, k: int | None = None) -> list[ScoredTool]:
        """Tools best first (ties keep input order); `k` caps the length.

        A tool's `score` is the lexical one (0.0 = no lexical evidence) so the abstain
        threshold keeps its meaning; the order is the fused one.
        """
        fused, lexical = self.scores_and_lexical(query)
        limit = len(fused) if k is None else max(0, min(k, len(fused)))
        order = heapq.nsmallest(limit, range(len(fused)), key=lambda i: (-fused[i], i))
        return [ScoredTool(self._names[i], lexical[i]) for i in order]

    def should_abstain(self, scored: Sequence[ScoredTool], threshold: float | None = None) -> bool:
        """True when nothing looks relevant (by the lexical evidence of the ranked tools)."""
        limit = self.abstain_threshold if threshold is None else threshold
        return not scored or max(s.score for s in scored) < limit

    _cache: ClassVar[OrderedDict[tuple[tuple[str, str], ...], HybridRanker]] = OrderedDict()
    _cache_lock: ClassVar[Lock] = Lock()

    @classmethod
    def cached(cls, tools: Sequence[ToolDef]) -> HybridRanker:
        """Shared ranker for this tool set: small LRU keyed by the (name, description) pairs."""
        key = tuple((t.name, t.description) for t in tools)
        with cls._cache_lock:
            hit = cls._cache.get(key)
            if hit is not None:
                cls._cache.move_to_end(key)
                return hit
        ranker = cls(tools)
        with cls._cache_lock:
            cls._cache[key] = ranker
            while len(cls._cache) > _CACHE_SIZE:
                cls._cache.popitem(last=False)
        return ranker

    @classmethod
    def cache_clear(cls) -> None:
        with cls._cache_lock:
            cls._cache.clear()
