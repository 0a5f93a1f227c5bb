"""BM25F postings over fielded token lists: the lexical scorer of the tool ranker and of
knowledge retrieval.

Every per-(term, document) weight is query-independent, so `build_postings` precomputes them
and a query costs one vectorised add per query term (`score`).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

K1 = 1.2

Posting = tuple[npt.NDArray[np.intp], npt.NDArray[np.float64]]
"""(document indexes, idf x saturated BM25F pseudo term frequency per document)."""
Postings = dict[str, Posting]


@dataclass(frozen=True, slots=True)
class FieldWeight:
    weight: float
    b: float
    """Length normalisation (0 = none, 1 = full)."""


def bigrams(tokens: Sequence[str]) -> list[str]:
    return [f"{a} {b}" for a, b in itertools.pairwise(tokens)]


def build_postings(
    docs: Sequence[Sequence[Sequence[str]]],
    fields: Sequence[FieldWeight],
    *,
    bigram_fields: int,
    bigram_weight: float,
) -> Postings:
    """term -> posting, for documents given as one token list per field (in `fields` order).

    Bigrams are indexed for the first `bigram_fields` fields, at `bigram_weight`.
    """
    avg_len = [
        max(1.0, sum(len(d[f]) for d in docs) / max(1, len(docs))) for f in range(len(fields))
    ]
    pseudo_tf: list[dict[str, float]] = []
    df: dict[str, int] = {}
    for doc in docs:
        acc: dict[str, float] = {}
        for f, tokens in enumerate(doc):
            spec = fields[f]
            scale = spec.weight / (1.0 - spec.b + spec.b * len(tokens) / avg_len[f])
            for term in tokens:
                acc[term] = acc.get(term, 0.0) + scale
            if f < bigram_fields:
                bigram_scale = bigram_weight * scale
                for term in bigrams(tokens):
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


def query_terms(
    tokens: Sequence[str],
    postings: Mapping[str, Posting],
    *,
    synonyms: Mapping[str, Sequence[str]],
    expansion_weight: float,
) -> dict[str, float]:
    """A query's term weights: counts, indexed bigrams, synonyms of words the index lacks."""
    weights: dict[str, float] = {t: float(c) for t, c in Counter(tokens).items()}
    for term in bigrams(tokens):
        if term in postings:
            weights[term] = weights.get(term, 0.0) + 1.0
    for term in set(tokens):
        # Expand only words the index never uses: where it says "fetch" itself, expanding
        # a request's "fetch" to every "get"/"retrieve" document measurably hurts precision.
        if term in postings:
            continue
        for syn in synonyms.get(term, ()):
            weights.setdefault(syn, expansion_weight)
    return weights


def score(
    postings: Mapping[str, Posting], weights: Mapping[str, float], n: int
) -> npt.NDArray[np.float64]:
    """Score per document (0.0 = no evidence): one vectorised add per query term."""
    scores = np.zeros(n, dtype=np.float64)
    for term, qw in weights.items():
        posting = postings.get(term)
        if posting is not None:
            scores[posting[0]] += qw * posting[1]  # a term lists each document at most once
    return scores
