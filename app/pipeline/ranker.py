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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from app.kit.lru import Lru
from app.pipeline.routing import SourceRouter
from app.pipeline.tool_fields import tool_fields
from app.pipeline.vocabulary import (
    abbreviations,
    aliases,
    derivations,
    expansions,
    merged,
    rewrite,
    shortenings,
    spoken_keys,
)
from app.retrieval.lexical import FieldWeight as _Field
from app.retrieval.lexical import Postings, build_postings, query_terms, score
from app.retrieval.text import STOPWORDS, SYNONYMS, tokenize, words
from app.tools.base import ToolDef

LEXICAL_MIN_SCORE = 0.3
"""Relevance below which the lexical ranker keeps nothing (see `LexicalRanker.rank`)."""
_UNKNOWN_TERM = 0.5
"""A request word the catalog never uses counts as half a typical word of the request against
its relevance: "book a table at an Italian place" is mostly about things no tool does."""


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
_CORE_FIELDS = (0, 1, 2, 4, 6)
"""Name, route, summary, parameter names and tags: what an operation is, in few words
(`LexicalRanker.vocabulary`)."""
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
_UNSURE_KEEP = 2


@dataclass(frozen=True, slots=True)
class ScoredTool:
    name: str
    score: float


def _build_postings(fields: Sequence[Sequence[Sequence[str]]]) -> Postings:
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
    kept in a small LRU per ranker class keyed by the tools' content (`key`).

    `rank` gives each tool a relevance score (0 = no evidence, about 1 = the request's words
    all found in the tool); `min_score` is the relevance below which nothing is kept."""

    min_score: float = LEXICAL_MIN_SCORE
    weak_score: float = LEXICAL_MIN_SCORE / 2
    sure_score: float = 0.0
    """When no kept tool reaches this, at most `_UNSURE_KEEP` are kept (0: no cap)."""
    _cache: ClassVar[Lru[tuple[Any, ...], Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._cache = Lru(_CACHE_SIZE)

    def __init__(self, tools: Sequence[ToolDef]) -> None:
        self._names = [t.name for t in tools]

    def __len__(self) -> int:
        return len(self._names)

    @staticmethod
    def key(tools: Sequence[ToolDef]) -> tuple[Any, ...]:
        """What a ranker is built from: each tool's name, description and search hints."""
        return tuple((t.name, t.description, t.hints) for t in tools)

    @classmethod
    def cached(cls, tools: Sequence[ToolDef]) -> Self:
        """Shared ranker for this tool set (a small LRU keyed by `key`)."""
        ranker: Self = cls._cache.get_or_build(cls.key(tools), lambda: cls(tools))
        return ranker

    @classmethod
    def is_cached(cls, tools: Sequence[ToolDef]) -> bool:
        return cls._cache.get(cls.key(tools)) is not None

    @classmethod
    def lookup(cls, key: tuple[Any, ...]) -> Self | None:
        """The ranker built for the tools whose `key` this is, if it is cached."""
        found: Self | None = cls._cache.get(key)
        return found

    def kept(
        self, scored: Sequence[ScoredTool], k: int, *, weak: bool = False, query: str = ""
    ) -> list[ScoredTool]:
        """The first `k` ranked tools at or above `min_score`. With `weak` (runtime selection),
        when none is, the best one alone if it reaches `weak_score` (a paraphrase only the
        embeddings found, say); searches say "nothing matches" instead. When even the best
        kept tool is under `sure_score`, or the request (`query`) is `unsure`, only the first
        `_UNSURE_KEEP` are kept: a request no tool serves ("play some jazz in the living
        room") rarely matches more than weakly."""
        kept = [s for s in scored[:k] if s.score >= self.min_score]
        if kept and (max(s.score for s in kept) < self.sure_score or self.unsure(query)):
            return kept[:_UNSURE_KEEP]
        if kept or not weak or not scored or k <= 0:
            return kept
        best = max(scored, key=lambda s: s.score)
        return [best] if best.score >= self.weak_score else []

    def unsure(self, query: str) -> bool:
        """True when the request itself says the ranking is a guess (see `HybridRanker`)."""
        return False

    def should_abstain(self, scored: Sequence[ScoredTool], threshold: float | None = None) -> bool:
        """True when nothing looks relevant: no tools, or none scores `min_score`."""
        limit = self.min_score if threshold is None else threshold
        return not scored or max(s.score for s in scored) < limit

    @classmethod
    def cache_clear(cls) -> None:
        cls._cache.clear()


class LexicalRanker(CachedRanker):
    """Rank a fixed set of tools against free-text requests; build once, query many times."""

    def __init__(self, tools: Sequence[ToolDef]) -> None:
        super().__init__(tools)
        fields = [tool_fields(t) for t in tools]
        self._postings = _build_postings(fields)
        self._matcher = _NameMatcher(self._names)
        routed = sum(1 for t in tools if t.hints is not None and t.hints.path)
        self.operations = 2 * routed > len(tools)
        """Mostly API operations (method and path), not free-text tools."""
        self.mined = abbreviations(t.description for t in tools)
        """Abbreviations the catalog spells out (vocabulary.abbreviations) and, on catalogs of
        API operations, its verbs' nouns (vocabulary.derivations)."""
        if self.operations:
            # An operation's name words without its source's name (`github__repos_get`).
            names = [[w for w in f[0] if w not in f[7][:1]] for f in fields]
            short = shortenings(names, (f[2] for f in fields))
            alias = aliases(names, (f[2] for f in fields))
            self.mined = merged(self.mined, derivations(self._postings), short, alias)
        self.vocabulary: frozenset[str] | None = None
        """On catalogs of API operations, the words that say what an operation is: those of
        its name, route, summary, parameter names and tags (`foreign_share`; None: every word
        the postings hold)."""
        if self.operations:
            self.vocabulary = frozenset(
                token for f in fields for i in _CORE_FIELDS for token in f[i]
            )
        self._best_weights: dict[str, float] = {}
        self.router = SourceRouter([t.hints.source if t.hints else "" for t in tools], fields)

    def route_boosts(self, query: str) -> npt.NDArray[np.float64] | None:
        """Per tool, the log share of its source for this request (None: nothing to route)."""
        return self.router.boosts(self._query_terms(query))

    def query_terms(self, query: str) -> dict[str, float]:
        """The request's weighted terms: its own, synonyms and users'-words expansions."""
        return self._query_terms(query)

    def _query_terms(self, query: str) -> dict[str, float]:
        return self._query(query)[1]

    def _query(self, query: str) -> tuple[list[str], dict[str, float]]:
        text = rewrite(query, values=self.operations)
        tokens = tokenize(text)
        weights = query_terms(
            tokens,
            self._postings,
            synonyms=SYNONYMS,
            expansion_weight=_EXPANSION_WEIGHT,
        )
        # On catalogs of API operations, also the table's words the tokenizer drops as filler
        # ("tell #design ..."; on MetaTool's and BFCL's requests "tell" is mostly filler).
        spoken = spoken_keys(text) if self.operations else []
        for term, weight in expansions([*tokens, *spoken], self.mined).items():
            if term in self._postings:
                weights.setdefault(term, weight)
        return tokens, weights

    def _best(self, term: str) -> float | None:
        """The most one tool can score for a term (None: no tool uses it)."""
        best = self._best_weights.get(term)
        if best is None:
            posting = self._postings.get(term)
            if posting is None:
                return None
            best = self._best_weights[term] = float(posting[1].max())
        return best

    def foreign_share(self, query: str) -> float:
        """The share of the request's words the catalog never uses, not even through the
        users'-words table ("how long should I boil an egg?": boil and egg, 2 of 3). On
        catalogs of API operations only the words that say what an operation is count as
        used (`vocabulary`): a word only the long descriptions use in passing ("work",
        "morning") says nothing about which operation a request wants."""
        tokens = tokenize(rewrite(query, values=self.operations))
        if not tokens:
            return 0.0
        known: frozenset[str] | Postings = (
            self._postings if self.vocabulary is None else self.vocabulary
        )
        foreign = 0
        for token in tokens:
            if token in known:
                continue
            if not any(w in known for w in expansions([token], self.mined)):
                foreign += 1
        return foreign / len(tokens)

    def relevance_scale(self, query: str) -> float:
        """What a tool scoring every request word best would score: lexical scores divided by
        it read as relevance (words the catalog never uses count at half a typical word)."""
        tokens = tokenize(rewrite(query, values=self.operations))
        known: list[float] = []
        unknown = 0
        for term, count in Counter(tokens).items():
            best = self._best(term)
            if best is None:
                unknown += count
            else:
                known.extend([best] * count)
        typical = float(np.median(known)) if known else 1.0
        return sum(known) + _UNKNOWN_TERM * typical * unknown

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
        """Tools best first (ties keep input order), each with its relevance (its lexical
        score over `relevance_scale`, at most 1); `k` caps the length."""
        raw = self.score_array(query)
        scale = self.relevance_scale(query) if raw.any() else 0.0
        scores = raw.tolist()
        limit = len(scores) if k is None else max(0, min(k, len(scores)))
        hits = [i for i, s in enumerate(scores) if s > 0.0]
        order = heapq.nsmallest(limit, hits, key=lambda i: (-scores[i], i))
        if len(order) < limit:  # pad with no-evidence tools in input order
            order.extend(
                itertools.islice((i for i, s in enumerate(scores) if s <= 0.0), limit - len(order))
            )
        unit = 1.0 / scale if scale > 0 else 1.0
        return [ScoredTool(self._names[i], round(min(scores[i] * unit, 1.0), 4)) for i in order]


def should_abstain(scored: Sequence[ScoredTool], threshold: float = LEXICAL_MIN_SCORE) -> bool:
    """Module-level form of `CachedRanker.should_abstain` for callers holding only results."""
    return not scored or max(s.score for s in scored) < threshold
