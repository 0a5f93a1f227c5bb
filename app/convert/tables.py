"""Markdown tables from rows of cells, the header repeated every ~1,000 characters so that
each chunk cut from a long table still says what its columns are."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

BLOCK_CHARS = 1000
"""A table longer than this is split into blocks, each with the header row."""
_SPACES = re.compile(r"\s+")


def cell_text(value: object) -> str:
    """One line, pipes escaped."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif hasattr(value, "isoformat"):
        value = value.isoformat()
    return _SPACES.sub(" ", str(value)).strip().replace("|", "\\|")


def _line(cells: Sequence[str], width: int) -> str:
    padded = [*cells, *([""] * (width - len(cells)))]
    return "| " + " | ".join(padded) + " |"


def markdown_table(rows: Iterable[Sequence[object]]) -> str:
    """The first non-empty row is the header; empty rows and trailing empty columns dropped.

    A table of one row or one column is rather a list: its cells come out as paragraphs.
    """
    cleaned: list[list[str]] = []
    for row in rows:
        cells = [cell_text(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            cleaned.append(cells)
    if not cleaned:
        return ""
    width = max(len(r) for r in cleaned)
    if width == 1 or len(cleaned) == 1:
        return "\n\n".join(" ".join(c for c in r if c) for r in cleaned)
    header = [c or f"Column {i + 1}" for i, c in enumerate([*cleaned[0], *[""] * width][:width])]
    head = f"{_line(header, width)}\n{_line(['---'] * width, width)}"
    blocks: list[str] = []
    lines: list[str] = []
    size = 0
    for row in cleaned[1:]:
        line = _line(row, width)
        if lines and size + len(line) > BLOCK_CHARS:
            blocks.append("\n".join([head, *lines]))
            lines, size = [], 0
        lines.append(line)
        size += len(line) + 1
    blocks.append("\n".join([head, *lines]))
    return "\n\n".join(blocks)
