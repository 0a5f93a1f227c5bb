"""Directory-scoped convention recall (docs/contract.md §6.4), pure functions over loaded rows.

Directories are project-relative POSIX paths. `normalize_directory` turns backslashes
into `/`, drops `.` segments, leading/trailing slashes and resolves `..`; the project
root is the empty string `""` (a row stored as `""`, `"."`, `"./"` or `"/"` is a
root-level convention) and is printed as `.` in recall lines. A row whose directory is
None is a language-level convention.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Protocol

from rapidfuzz import fuzz, process

ROOT = ""
ROOT_LABEL = "."
_TOKEN_RE = re.compile(r"[a-z0-9]+")
_BM25_K1 = 1.2
_BM25_B = 0.75
_FUZZY_CUTOFF = 85.0
_FUZZY_WEIGHT = 0.5


class ConventionLike(Protocol):
    @property
    def language(self) -> str: ...

    @property
    def directory(self) -> str | None: ...

    @property
    def content(self) -> str: ...


def normalize_directory(directory: str) -> str:
    """`./src\\api/` → `src/api`; any spelling of the project root → `""`."""
    path = directory.strip().replace("\\", "/").strip("/")
    if not path:
        return ROOT
    path = posixpath.normpath(path)
    while path.startswith("../"):
        path = path[3:]
    return ROOT if path in (".", "..") else path


def parent_chain(directory: str) -> list[str]:
    """The directory, then each parent, ending with the project root `""`."""
    path = normalize_directory(directory)
    chain: list[str] = []
    while path:
        chain.append(path)
        path = posixpath.dirname(path)
    chain.append(ROOT)
    return chain


def _label(row: ConventionLike) -> str:
    if row.directory is None:
        return row.language
    return normalize_directory(row.directory) or ROOT_LABEL


def format_line(row: ConventionLike) -> str:
    return f"- [{_label(row)}] {row.content}"


def _dedupe(rows: Iterable[ConventionLike], limit: int) -> list[str]:
    lines: list[str] = []
    seen: set[str] = set()
    for row in rows:
        if len(lines) >= limit:
            break
        if row.content in seen:
            continue
        seen.add(row.content)
        lines.append(format_line(row))
    return lines


def recall_conventions(
    rows: Sequence[ConventionLike],
    *,
    language: str,
    directory: str | None,
    limit: int = 5,
) -> list[str]:
    """Nearest directory first, then each parent, the root, then the language level.

    Language matches case-insensitively; inside one level rows keep their input order.
    Without a directory only language-level conventions are returned.
    """
    wanted = language.casefold()
    mine = [row for row in rows if row.language.casefold() == wanted]
    levels: list[str | None] = [*parent_chain(directory), None] if directory is not None else [None]
    by_level: dict[str | None, list[ConventionLike]] = {level: [] for level in levels}
    for row in mine:
        key = None if row.directory is None else normalize_directory(row.directory)
        if key in by_level:
            by_level[key].append(row)
    return _dedupe((row for level in levels for row in by_level[level]), limit)


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.casefold())


def _document(row: ConventionLike) -> list[str]:
    return _tokens(" ".join((row.content, row.language, row.directory or "")))


def _expand_query(query_terms: Iterable[str], vocabulary: Sequence[str]) -> dict[str, float]:
    """Query term → weight; an unknown term borrows its closest vocabulary word (typos)."""
    weights: dict[str, float] = {}
    known = set(vocabulary)
    for term in query_terms:
        if term in known:
            weights[term] = max(weights.get(term, 0.0), 1.0)
            continue
        match = process.extractOne(term, vocabulary, scorer=fuzz.ratio, score_cutoff=_FUZZY_CUTOFF)
        if match is not None:
            weights[match[0]] = max(weights.get(match[0], 0.0), _FUZZY_WEIGHT)
    return weights


def _bm25(docs: list[list[str]], weights: dict[str, float]) -> list[float]:
    count = len(docs)
    average = sum(len(doc) for doc in docs) / count or 1.0
    frequency = Counter(term for doc in docs for term in set(doc))
    scores: list[float] = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for term, weight in weights.items():
            tf = counts.get(term, 0)
            if not tf:
                continue
            idf = math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))
            norm = tf + _BM25_K1 * (1 - _BM25_B + _BM25_B * len(doc) / average)
            score += weight * idf * tf * (_BM25_K1 + 1) / norm
        scores.append(score)
    return scores


def search_conventions(rows: Sequence[ConventionLike], query: str, limit: int = 5) -> list[str]:
    """BM25 over content, language and directory (typo-tolerant); best first, ties in input order.

    Rows that share no term with the query are left out; an empty query lists rows in
    input order. Duplicate contents are returned once.
    """
    if limit <= 0 or not rows:
        return []
    terms = _tokens(query)
    if not terms:
        return _dedupe(rows, limit)
    docs = [_document(row) for row in rows]
    vocabulary = sorted({term for doc in docs for term in doc})
    scores = _bm25(docs, _expand_query(terms, vocabulary))
    ranked = sorted(
        (index for index, score in enumerate(scores) if score > 0),
        key=lambda index: -scores[index],
    )
    return _dedupe((rows[index] for index in ranked), limit)
