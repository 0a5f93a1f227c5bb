"""Normalized Levenshtein similarity, measured in characters (code points).

See docs/contract.md §6.2.
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insert, delete, substitute; each costs 1) between `a` and `b`."""
    return int(Levenshtein.distance(a, b))


def similarity(a: str, b: str) -> float:
    """`1 - distance / longer length`; both empty = 1.0, exactly one empty = 0.0."""
    longer = max(len(a), len(b))
    if longer == 0:
        return 1.0
    return 1.0 - levenshtein(a, b) / longer
