"""Local lexical tool ranker for runtime selection (docs/contract.md §4.4, strategy `lexical`).

BM25F over a tool's fields (name, first sentence of the description, the rest of it, parameter
names, parameter descriptions) plus bigrams, a fallback synonym expansion for request words the
catalog never uses, and a fuzzy bonus when the request names a tool almost verbatim. Every
per-(term, tool) weight is query-independent, so `__init__` precomputes postings and a query
costs one walk over its terms' postings: about a millisecond for 1,000 tools.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from app.kit.lru import Lru
from app.pipeline.routing import SourceRouter
from app.pipeline.tool_fields import tool_fields
from app.pipeline.vocabulary import abbreviations, expansions, rewrite
from app.retrieval.lexical import FieldWeight as _Field
from app.retrieval.lexical import Postings, build_postings, query_terms, score
from app.retrieval.text import STOPWORDS, SYNONYMS, tokenize, words
from app.tools.base import ToolDef

DEFAULT_ABSTAIN_THRESHOLD = 0.4
"""Best score below which nothing looks relevant (about 5% false abstains on BFCL live)."""


# Order matches `tool_fields.FIELD_NAMES`. Tuned on the shared selection datasets and the
# development half of the real-catalog set (bench/selection.py).
_FIELDS: tuple[_Field, ...] = (
    _Field(weight=3.0, b=0.3),  # name
    _Field(weight=2.0, b=0.3),  # method and path as words
    _Field(weight=0.8, b=0.4),  # first sentence of the description
    _Field(weight=1.0, b=0.75),  # rest of the description
    _Field(weight=1.2, b=0.5),  # parameter names
    _Field(weight=0.8, b=0.5),  # parameter descriptions and enum values
    _Field(weight=1.0, b=0.3),  # OpenAPI tags
    _Field(weight=0.5, b=0.3),  # the source's name and description
)
_BIGRAM_FIELDS = 4
"""Bigrams are indexed for the name, route and description fields only."""
_BIGRAM_WEIGHT = 0.5
_EXPANSION_WEIGHT = 0.5
ROUTE_LEXICAL = 0.3
"""How much a source's share of the request scales its tools' lexical scores
(`exp(0.3 x log share)`: a source with a tenth of the best one's share keeps half)."""
_NAME_MATCH = 90.0
"""rapidfuzz similarity (0-100) from which a tool name counts as mentioned in the request."""
_IDENT_MATCH = 85.0
"""Similarity for identifier-looking request tokens (`create_isue`) against tool names."""
_SINGLE_WORD_NAME = 0.15
"""Bonus strength for one-word names: "search" in a request is rarely a reference to a tool."""
_IDENTIFIER = re.compile(r"\w+(?:[._\-/]\w+)+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*")
_MAX_IDENTIFIERS = 16
"""Fuzzy lookups per request; bounds the cost of pasted code or logs."""
_CACHE_SIZE = 8


@dataclass(frozen=True, slots=True)
class ScoredTool:
    name: str
    score: float


def _build_postings(fields: Sequence[Sequence[list[str]]]) -> Postings:
    """term -> (tool indexes, idf * saturated BM25F pseudo term frequency per tool)."""
    return build_postings(
        fields,
        _FIELDS,
        bigram_fields=_BIGRAM_FIELDS,
        bigram_weight=_BIGRAM_WEIGHT,
    )


class _NameMatcher:
    """Finds tools whose name the request spells out (exactly, or with a typo)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.phrases = [" ".join(words(n)) for n in names]
        self.sizes = [len(set(p.split())) for p in self.phrases]
        self._sizes = np.asarray(self.sizes, dtype=np.int32)
        by_word: dict[str, list[int]] = {}
        for i, phrase in enumerate(self.phrases):
            for w in set(phrase.split()):
                by_word.setdefault(w, []).append(i)
        self.by_word = {w: np.asarray(ids, dtype=np.intp) for w, ids in by_word.items()}

    def mentions(self, query: str) -> dict[int, float]:
        """Tool index -> similarity (0-100) for names mentioned in the request."""
        qwords = words(query)
        qphrase = " ".join(qwords)
        found: dict[int, float] = {}
        shared = np.zeros(len(self.phrases), dtype=np.int32)
        for w in set(qwords):
            ids = self.by_word.get(w)
            if ids is not None and w not in STOPWORDS:
                shared[ids] += 1  # a word lists each name at most once
        # A mention needs at least half the name's words in the request.
        for i in np.flatnonzero((shared > 0) & (2 * shared >= self._sizes)).tolist():
            phrase = self.phrases[i]
            if len(phrase) > len(qphrase):
                sim = fuzz.ratio(phrase, qphrase)
            else:
                sim = fuzz.partial_ratio(phrase, qphrase)
            if sim >= _NAME_MATCH:
                found[i] = sim
        identifiers = dict.fromkeys(_IDENTIFIER.findall(query))
        for token in itertools.islice(identifiers, _MAX_IDENTIFIERS):
            hit = process.extractOne(
                " ".join(words(token)), self.phrases, scorer=fuzz.ratio, score_cutoff=_IDENT_MATCH
            )
            if hit is not None:
                found[hit[2]] = max(found.get(hit[2], 0.0), float(hit[1]))
        return found


class CachedRanker:
    """What every ranker shares: built once for a fixed set of tools, queried many times, and
    kept in a small LRU per ranker class keyed by the tools' (name, description) pairs."""

    abstain_threshold: float
    _cache: ClassVar[Lru[tuple[tuple[str, str], ...], Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._cache = Lru(_CACHE_SIZE)

    def __init__(
        self, tools: Sequence[ToolDef], *, abstain_threshold: float = DEFAULT_ABSTAIN_THRESHOLD
    ) -> None:
        self.abstain_threshold = abstain_threshold
        self._names = [t.name for t in tools]

    def __len__(self) -> int:
        return len(self._names)

    @classmethod
    def cached(cls, tools: Sequence[ToolDef]) -> Self:
        """Shared ranker for this tool set: small LRU keyed by the (name, description) pairs."""
        key = tuple((t.name, t.description) for t in tools)
        ranker: Self = cls._cache.get_or_build(key, lambda: cls(tools))
        return ranker

    @classmethod
    def cache_clear(cls) -> None:
        cls._cache.clear()


class LexicalRanker(CachedRanker):
    """Rank a fixed set of tools against free-text requests; build once, query many times."""

    def __init__(
        self, tools: Sequence[ToolDef], *, abstain_threshold: float = DEFAULT_ABSTAIN_THRESHOLD
    ) -> None:
        super().__init__(tools, abstain_threshold=abstain_threshold)
        fields = [tool_fields(t) for t in tools]
        self._postings = _build_postings(fields)
        self._matcher = _NameMatcher(self._names)
        self._mined = abbreviations(t.description for t in tools)
        self.router = SourceRouter([t.hints.source if t.hints else "" for t in tools], fields)

    def route_boosts(self, query: str) -> npt.NDArray[np.float64] | None:
        """Per tool, the log share of its source for this request (None: nothing to route)."""
        return self.router.boosts(self._query_terms(query))

    def _query_terms(self, query: str) -> dict[str, float]:
        tokens = tokenize(rewrite(query))
        weights = query_terms(
            tokens,
            self._postings,
            synonyms=SYNONYMS,
            expansion_weight=_EXPANSION_WEIGHT,
        )
        for term, weight in expansions(tokens, self._mined).items():
            if term in self._postings:
                weights.setdefault(term, weight)
        return weights

    def scores(self, query: str) -> list[float]:
        """Score per tool, in input order (0.0 = no evidence)."""
        return [float(x) for x in self.score_array(query)]

    def score_array(self, query: str, *, names: bool = True) -> npt.NDArray[np.float64]:
        """`scores` as a numpy vector (one vectorised add per query term).

        `names=False` leaves out the bonus for tools the request names (the fuzzy part).
        """
        weights = self._query_terms(query)
        scores = score(self._postings, weights, len(self._names))
        boosts = self.router.boosts(weights) if self.router.active else None
        if boosts is not None:
            scores *= np.exp(ROUTE_LEXICAL * boosts)
        mentions = self._matcher.mentions(query) if names else None
        if mentions:
            # Scaled to the best lexical score so a named tool outranks merely similar ones.
            unit = float(scores.max()) + 1.0
            for i, sim in mentions.items():
                strength = 1.0 if self._matcher.sizes[i] > 1 else _SINGLE_WORD_NAME
                scores[i] += strength * unit * sim / 100.0
        return scores

    def rank(self, query: str, k: int | None = None) -> list[ScoredTool]:
        """Tools best first (ties keep input order); `k` caps the length."""
        scores = self.scores(query)
        limit = len(scores) if k is None else max(0, min(k, len(scores)))
        hits = [i for i, s in enumerate(scores) if s > 0.0]
        order = heapq.nsmallest(limit, hits, key=lambda i: (-scores[i], i))
        if len(order) < limit:  # pad with no-evidence tools in input order
            order.extend(
                itertools.islice((i for i, s in enumerate(scores) if s <= 0.0), limit - len(order))
            )
        return [ScoredTool(self._names[i], scores[i]) for i in order]

    def should_abstain(self, scored: Sequence[ScoredTool], threshold: float | None = None) -> bool:
        """True when nothing looks relevant: no tools, or the best score is below the threshold."""
        limit = self.abstain_threshold if threshold is None else threshold
        return not scored or scored[0].score < limit


def should_abstain(
    scored: Sequence[ScoredTool], threshold: float = DEFAULT_ABSTAIN_THRESHOLD
) -> bool:
    """Module-level form of `LexicalRanker.should_abstain` for callers holding only results."""
    return not scored or scored[0].score < threshold
