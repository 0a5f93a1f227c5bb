"""Reference extraction for pre-hydration (docs/contract.md §6.3).

Order: every url, then every file path, every PR, every issue, then each custom pattern
in its configured order; inside one kind, text order. Values are deduplicated across
kinds (first wins) and the list stops at `max_references`.

Choices beyond the regexes of docs/contract.md:
- Trailing sentence punctuation (`.,;:!?'"`) is trimmed from a URL, so
  `see https://x.dev/a.` yields `https://x.dev/a`.
- `#<n>` inside a URL (`https://x.dev/page#12`) or inside a PR mention (`PR #12`) is not
  an issue.
- PR and issue values are the bare number (`12`), so a PR number is never also an issue.
- A custom pattern contributes group 1 when it has groups, else the whole match; empty
  values (a pattern matching the empty string, an unmatched group) are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from app.agents.config import CustomPattern

URL_RE = re.compile(r"https?://[^\s)>\]]+")
FILE_RE = re.compile(r"(?:^|\s)([./~][a-zA-Z0-9_/.\-]+\.[a-zA-Z0-9]+)")
PR_RE = re.compile(r"(?i)\bPR\s*#(\d+)")
ISSUE_RE = re.compile(r"#(\d+)")
_URL_TRAILING = ".,;:!?'\""


@dataclass(frozen=True)
class Reference:
    ref_type: str
    value: str


@dataclass(frozen=True)
class _Found:
    ref_type: str
    value: str
    span: tuple[int, int]


def _urls(text: str) -> Iterator[_Found]:
    for match in URL_RE.finditer(text):
        value = match.group(0).rstrip(_URL_TRAILING)
        # The span stays the raw match: a `#12` right after the trimmed part is still URL.
        yield _Found("url", value, match.span())


def _files(text: str) -> Iterator[_Found]:
    for match in FILE_RE.finditer(text):
        yield _Found("file", match.group(1), match.span(1))


def _prs(text: str) -> Iterator[_Found]:
    for match in PR_RE.finditer(text):
        yield _Found("pr", match.group(1), match.span())


def _issues(text: str, taken: Sequence[tuple[int, int]]) -> Iterator[_Found]:
    for match in ISSUE_RE.finditer(text):
        start = match.start()
        if any(lo <= start < hi for lo, hi in taken):
            continue
        yield _Found("issue", match.group(1), match.span())


def _custom(text: str, pattern: CustomPattern) -> Iterator[_Found]:
    regex = re.compile(pattern.pattern)
    for match in regex.finditer(text):
        value = match.group(1) if regex.groups else match.group(0)
        if value:
            yield _Found(pattern.ref_type, value, match.span())


def _candidates(text: str, custom_patterns: Sequence[CustomPattern]) -> Iterator[_Found]:
    urls = list(_urls(text))
    prs = list(_prs(text))
    yield from urls
    yield from _files(text)
    yield from prs
    yield from _issues(text, [found.span for found in (*urls, *prs)])
    for pattern in custom_patterns:
        yield from _custom(text, pattern)


def extract_references(
    text: str,
    *,
    custom_patterns: Sequence[CustomPattern] = (),
    max_references: int = 10,
) -> list[Reference]:
    """References in pattern order, deduplicated by value (first wins), at most `max_references`."""
    references: list[Reference] = []
    seen: set[str] = set()
    if max_references <= 0:
        return references
    for found in _candidates(text, custom_patterns):
        if found.value in seen:
            continue
        seen.add(found.value)
        references.append(Reference(found.ref_type, found.value))
        if len(references) >= max_references:
            break
    return references
