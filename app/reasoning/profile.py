"""Tool profile (docs/contract.md §6.1): include globs → exclude globs → verified-only → cap.

The same decision feeds two places: the tool list the model sees and dispatch, which
must refuse a name the profile removed even if the model guesses it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import TypeVar

from app.agents.config import ToolProfile

T = TypeVar("T")

VERIFIED_MARKER = "[verified]"


@lru_cache(maxsize=1024)
def _compile(pattern: str) -> re.Pattern[str]:
    parts: list[str] = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def glob_match(pattern: str, name: str) -> bool:
    """Whole-name, case-sensitive match: `*` any run, `?` one character, all else literal.

    Unlike `fnmatch`, `[` and `]` are literal characters, never character classes.
    """
    return _compile(pattern).fullmatch(name) is not None


def _matches_any(patterns: Iterable[str], name: str) -> bool:
    return any(glob_match(pattern, name) for pattern in patterns)


def apply_profile(
    tools: Sequence[T],
    profile: ToolProfile,
    *,
    name: Callable[[T], str],
    description: Callable[[T], str],
) -> list[T]:
    """Keep the tools the profile allows, in input order."""
    kept = [
        tool
        for tool in tools
        if (not profile.include or _matches_any(profile.include, name(tool)))
        and not _matches_any(profile.exclude, name(tool))
        and (not profile.require_verified or VERIFIED_MARKER in description(tool))
    ]
    if profile.max_tools is not None:
        kept = kept[: profile.max_tools]
    return kept
