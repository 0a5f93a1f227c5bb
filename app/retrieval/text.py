"""Tokenisation for the lexical tool ranker: identifier splitting, stop words, a tiny stemmer.

Deliberately dependency-free: the ranker must build an index for 1,000 tools in milliseconds and
run without model downloads, so we use a small suffix stripper instead of an NLP stemmer.
"""

from __future__ import annotations

import re
from functools import lru_cache

_RUN = re.compile(r"[^\W_]+")
"""Unicode letter/digit runs: snake_case, kebab-case, dots and spaces all separate words."""
_ASCII_WORD = re.compile(r"(?:[A-Z]+(?![a-z])|[A-Z]?[a-z]+)[0-9]*|[0-9]+")
"""camelCase/PascalCase boundaries inside an ASCII run (`HTTPServer` -> HTTP, Server); trailing
digits stay on their word (`s3`, `ec2`, `v2`)."""

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each either else etc ever
    every few for from further had has have having he her here hers him his how however i if in
    into is it its itself just let lets like may me might more most much must my myself need
    needs no nor not now of off on once only or other our ours out over own please per same shall
    she should so some such than that the their theirs them then there these they this those
    through to too under until up upon us use used uses using very via want wants was way we were
    what when where whether which while who whom whose why will with within without would yes yet
    you your yours yourself im ive youre dont cant wont tell help know go eg ie don doesn
    didn isn aren wasn weren couldn shouldn wouldn haven hasn
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Function words plus conversational filler ("can you help me ...") that carries no intent."""

_DOUBLE_OK = frozenset("lsz")
_SUFFIXES = ("ing", "ed", "ion", "ly")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Strip common English inflection (plural, -ing, -ed, -ion, -ly, trailing e)."""
    if len(word) <= 3 or word.isdigit():
        return word
    w = word
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in _SUFFIXES:
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) >= 4 and w[-1] == w[-2] and w[-1] not in _DOUBLE_OK and w[-1].isalpha():
                w = w[:-1]
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


def words(text: str) -> list[str]:
    """Lowercase word runs split at snake/kebab/camel boundaries (no stop words, no stemming)."""
    out: list[str] = []
    for run in _RUN.findall(text):
        if run.isascii():
            out.extend(w.lower() for w in _ASCII_WORD.findall(run))
        else:
            out.append(run.lower())
    return out


def tokenize(text: str) -> list[str]:
    """Index/query terms: identifier-split, lowercased, stemmed; no stop words, no numbers.

    Numbers in a request are arguments (amounts, ids, dates), not intents; in tool text they are
    defaults and examples. Dropping them measurably improves ranking on BFCL.
    """
    return [stem(w) for w in words(text) if len(w) > 1 and w not in STOPWORDS and not w.isdigit()]


_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "retrieve", "obtain", "lookup", "look", "read", "query", "check"),
    ("list", "search", "find", "browse", "discover", "show", "display"),
    ("create", "add", "new", "make", "insert", "register", "open"),
    ("delete", "remove", "erase", "destroy", "drop", "cancel", "clear"),
    ("update", "edit", "modify", "change", "set", "alter", "patch", "adjust"),
    ("send", "post", "submit", "deliver", "notify"),
    ("buy", "purchase", "order", "shop"),
    ("book", "reserve", "reservation", "schedule"),
    ("picture", "image", "photo"),
    ("movie", "film"),
    ("song", "music", "track"),
    ("car", "vehicle"),
    ("price", "cost"),
    ("home", "house", "property"),
    ("job", "career", "employment"),
    ("weather", "forecast"),
    ("translate", "translation", "language"),
)


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = {stem(w) for w in group}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {k: tuple(sorted(v)) for k, v in table.items()}


SYNONYMS: dict[str, tuple[str, ...]] = _build_synonyms()
"""Stemmed term -> stemmed alternatives that tool descriptions commonly use for the same intent."""
