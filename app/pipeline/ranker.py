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
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
from rapidfuzz import fuzz, process

from app.kit.lru import Lru
from app.pipeline.text import STOPWORDS, SYNONYMS, tokenize, words
from app.tools.base import ToolDef

K1 = 1.2
DEFAULT_ABSTAIN_THRESHOLD = 0.4
"""Best score below which nothing looks relevant (about 5% false abstains on BFCL live)."""


@dataclass(frozen=True, slots=True)
class _Field:
    weight: float
    b: float


# Order matches `_tool_fields`. Tuned on the shared selection datasets (bench/selection.py).
_FIELDS: tuple[_Field, ...] = (
    _Field(weight=3.0, b=0.3),  # name
    _Field(weight=0.8, b=0.4),  # first sentence of the description
    _Field(weight=1.0, b=0.75),  # rest of the description
    _Field(weight=1.2, b=0.5),  # parameter names
    _Field(weight=0.8, b=0.5),  # parameter descriptions and enum values
)
_BIGRAM_FIELDS = 3
"""Bigrams are indexed for the name and description fields only."""
_BIGRAM_WEIGHT = 0.5
_EXPANSION_WEIGHT = 0.5
_NAME_MATCH = 90.0
"""rapidfuzz similarity (0-100) from which a tool name counts as mentioned in the request."""
_IDENT_MATCH = 85.0
"""Similarity for identifier-looking request tokens (`create_isue`) against tool names."""
_SINGLE_WORD_NAME = 0.15
"""Bonus strength for one-word names: "search" in a request is rarely a reference to a tool."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_IDENTIFIER = re.compile(r"\w+(?:[._\-/]\w+)+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*")
_MAX_IDENTIFIERS = 16
"""Fuzzy lookups per request; bounds the cost of pasted code or logs."""
_MAX_SCHEMA_DEPTH = 3
_CACHE_SIZE = 8


_Posting = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]


@dataclass(frozen=True, slots=True)
class ScoredTool:
    name: str
    score: float


def _schema_texts(schema: Mapping[str, Any], depth: int = 0) -> Iterator[tuple[str, str]]:
    """(parameter name, description + enum values) for a JSON schema, nested properties too."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or depth >= _MAX_SCHEMA_DEPTH:
        return
    for pname, spec in props.items():
        if not isinstance(spec, Mapping):
            yield str(pname), ""
            continue
        desc = spec.get("description")
        enum = spec.get("enum")
        extra = " ".join(str(v) for v in enum) if isinstance(enum, list) else ""
        yield str(pname), f"{desc if isinstance(desc, str) else ''} {extra}"
        yield from _schema_texts(spec, depth + 1)
        items = spec.get("items")
        if isinstance(items, Mapping):
            yield from _schema_texts(items, depth + 1)


def schema_parameter_names(schema: Mapping[str, Any]) -> list[str]:
    """Every parameter name of a JSON schema, nested ones too."""
    return [name for name, _ in _schema_texts(schema)]


def _tool_fields(tool: ToolDef) -> tuple[list[str], ...]:
    first, *rest = _SENTENCE_END.split(tool.description.strip(), maxsplit=1)
    params = list(_schema_texts(tool.parameters))
    return (
        tokenize(tool.name),
        tokenize(first),
        tokenize(rest[0] if rest else ""),
        tokenize(" ".join(p for p, _ in params)),
        tokenize(" ".join(d for _, d in params)),
    )


def _bigrams(tokens: Sequence[str]) -> list[str]:
    return [f"{a} {b}" for a, b in itertools.pairwise(tokens)]


def _build_postings(tools: Sequence[ToolDef]) -> dict[str, _Posting]:
    """term -> (tool indexes, idf * saturated BM25F pseudo term frequency per tool)."""
    docs = [_tool_fields(t) for t in tools]
    avg_len = [
        max(1.0, sum(len(d[f]) for d in docs) / max(1, len(docs))) for f in range(len(_FIELDS))
    ]
    pseudo_tf: list[dict[str, float]] = []
    df: dict[str, int] = {}
    for fields in docs:
        acc: dict[str, float] = {}
        for f, tokens in enumerate(fields):
            spec = _FIELDS[f]
            scale = spec.weight / (1.0 - spec.b + spec.b * len(tokens) / avg_len[f])
            for term in tokens:
                acc[term] = acc.get(term, 0.0) + scale
            if f < _BIGRAM_FIELDS:
                bigram_scale = _BIGRAM_WEIGHT * scale
                for term in _bigrams(tokens):
                    acc[term] = acc.get(term, 0.0) + bigram_scale
        for term in acc:
            df[term] = df.get(term, 0) + 1
        pseudo_tf.append(acc)
    n = len(docs)
    idf = {term: math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for term, d in df.items()}
    lists: dict[str, list[tuple[int, float]]] = {term: [] for term in df}
    for i, acc in enumerate(pseudo_tf):
        for term, ptf in acc.items():
            lists[term].append((i, idf[term] * ptf / (K1 + ptf)))
    return {
        term: (
            np.fromiter((i for i, _ in pairs), dtype=np.intp, count=len(pairs)),
            np.fromiter((w for _, w in pairs), dtype=np.float64, count=len(pairs)),
        )
        for term, pairs in lists.items()
    }


class _NameMatcher:
    """Finds tools whose name the request spells out (exactly, or with a typo)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.phrases = [" ".join(words(n)) for n in names]
        self.sizes = [len(set(p.split())) for p in self.phrases]
        self.by_word: dict[str, list[int]] = {}
        for i, phrase in enumerate(self.phrases):
            for w in set(phrase.split()):
                self.by_word.setdefault(w, []).append(i)

    def mentions(self, query: str) -> dict[int, float]:
        """Tool index -> similarity (0-100) for names mentioned in the request."""
        qwords = words(query)
        qphrase = " ".join(qwords)
        found: dict[int, float] = {}
        shared = Counter(
            i for w in set(qwords) if w not in STOPWORDS for i in self.by_word.get(w, ())
        )
        for i, count in shared.items():
            if 2 * count < self.sizes[i]:
                continue  # fewer than half the name's words occur: not a mention
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
        self._postings = _build_postings(tools)
        self._matcher = _NameMatcher(self._names)

    def _query_terms(self, query: str) -> dict[str, float]:
        tokens = tokenize(query)
        weights: dict[str, float] = {t: float(c) for t, c in Counter(tokens).items()}
        for term in _bigrams(tokens):
            if term in self._postings:
                weights[term] = weights.get(term, 0.0) + 1.0
        for term in set(tokens):
            # Expand only words the catalog never uses: where it says "fetch" itself, expanding
            # a request's "fetch" to every "get"/"retrieve" tool measurably hurts precision.
            if term in self._postings:
                continue
            for syn in SYNONYMS.get(term, ()):
                weights.setdefault(syn, _EXPANSION_WEIGHT)
        return weights

    def scores(self, query: str) -> list[float]:
        """Score per tool, in input order (0.0 = no evidence)."""
        return [float(x) for x in self.score_array(query)]

    def score_array(self, query: str) -> npt.NDArray[np.float64]:
        """`scores` as a numpy vector (one vectorised add per query term)."""
        scores = np.zeros(len(self._names), dtype=np.float64)
        for term, qw in self._query_terms(query).items():
            posting = self._postings.get(term)
            if posting is not None:
                scores[posting[0]] += qw * posting[1]  # a term lists each tool at most once
        mentions = self._matcher.mentions(query)
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
