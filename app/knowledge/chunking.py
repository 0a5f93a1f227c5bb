"""Split a document into chunks by headings, then by size, keeping where each came from.

Headings: Markdown `#` lines (also what every converted format becomes: HTML, PDF pages,
slides, sheets, DOCX heading styles) and, in text and Markdown documents, Markdown setext
headings and reStructuredText-style underlines (`****`, `====`, `----`: levels in order of
first use, as in the Python documentation's text). Nothing inside a fenced code block is a
heading. A section longer than `max_chars` is cut at paragraph, then line, then word
boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import accumulate

from app.convert.formats import Format

MAX_CHUNK_CHARS = 1200
"""About 300 tokens: small enough to cite precisely, large enough to hold an answer."""
HEADING_SEPARATOR = " > "
_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_UNDERLINE = re.compile(r"^([=\-~^*\"+#])\1{2,}[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(```|~~~)")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_UNDERLINED = frozenset({"text", "markdown"})
"""Formats whose headings may be underlined; converted ones (HTML, PDF, Office, …) have `#`
headings only, so a line of `=` in a PDF page never hides its `# Page N`."""


@dataclass(frozen=True, slots=True)
class Chunk:
    heading: tuple[str, ...]
    """The heading path, outermost first."""
    offset: int
    """Character offset of `text` in the document."""
    text: str

    @property
    def heading_path(self) -> str:
        return HEADING_SEPARATOR.join(self.heading)


@dataclass(frozen=True, slots=True)
class _Section:
    heading: tuple[str, ...]
    start: int
    end: int


def _line_starts(lines: list[str]) -> list[int]:
    """Where each line starts (linear, in C: a character loop took 2 s for 4 MB)."""
    return list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))


def _sections(text: str, fmt: Format) -> list[_Section]:
    """Body spans between headings, each with the heading path above it."""
    lines = text.split("\n")
    starts = _line_starts(lines)
    underline_levels: dict[str, int] = {}
    path: list[tuple[int, str]] = []
    sections: list[_Section] = []
    body_start = 0
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        heading: tuple[int, str] | None = None
        skip = 1
        if _FENCE.match(line) and fmt != "text":
            fenced = not fenced
        elif not fenced:
            atx = _ATX.match(line) if fmt != "text" else None
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            under = _UNDERLINE.match(nxt) if fmt in _UNDERLINED else None
            if atx:
                heading = (len(atx.group(1)), atx.group(2).strip())
            elif under and line.strip() and len(nxt.strip()) >= min(len(line.strip()), 3) * 0.5:
                char = under.group(1)
                if fmt == "markdown" and char in "=-":
                    level = 1 if char == "=" else 2
                else:
                    level = underline_levels.setdefault(char, len(underline_levels) + 1)
                heading, skip = (level, line.strip()), 2
        if heading is None:
            i += 1
            continue
        sections.append(_Section(tuple(h for _, h in path), body_start, starts[i]))
        level, title = heading
        path = [(lv, h) for lv, h in path if lv < level]
        path.append((level, title))
        i += skip
        body_start = starts[i] if i < len(starts) else len(text)
    sections.append(_Section(tuple(h for _, h in path), body_start, len(text)))
    return sections


def _pieces(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """(start, end) spans of at most `max_chars`, cut at the best boundary available."""
    spans: list[tuple[int, int]] = []
    while start < end:
        while start < end and text[start].isspace():
            start += 1
        if start >= end:
            break
        if end - start <= max_chars:
            spans.append((start, end))
            break
        window = text[start : start + max_chars]
        cut = -1
        for boundary in (_PARAGRAPH, re.compile(r"\n"), re.compile(r"[.!?]\s"), re.compile(r"\s")):
            found = [m.start() for m in boundary.finditer(window)]
            found = [f for f in found if f >= max_chars // 3]
            if found:
                cut = found[-1] + 1
                break
        if cut <= 0:
            cut = max_chars
        spans.append((start, start + cut))
        start += cut
    return spans


def _pack(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Whole paragraphs packed greedily up to `max_chars`; longer ones are cut."""
    paragraphs: list[tuple[int, int]] = []
    pos = start
    for match in _PARAGRAPH.finditer(text, start, end):
        paragraphs.append((pos, match.start()))
        pos = match.end()
    paragraphs.append((pos, end))
    spans: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for p_start, p_end in paragraphs:
        if not text[p_start:p_end].strip():
            continue
        if current is not None and p_end - current[0] <= max_chars:
            current = (current[0], p_end)
            continue
        if current is not None:
            spans.append(current)
        if p_end - p_start > max_chars:
            spans.extend(_pieces(text, p_start, p_end, max_chars))
            current = None
        else:
            current = (p_start, p_end)
    if current is not None:
        spans.append(current)
    return spans


def chunk_document(text: str, fmt: Format, *, max_chars: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Chunks in document order; sections with no text give none (their heading stays in
    the path of the sections below them)."""
    chunks: list[Chunk] = []
    for section in _sections(text, fmt):
        for start, end in _pack(text, section.start, section.end, max_chars):
            lead = len(text[start:end]) - len(text[start:end].lstrip())
            body = text[start:end].strip()
            if body:
                chunks.append(Chunk(heading=section.heading, offset=start + lead, text=body))
    return chunks
