"""Office Open XML documents (the libraries MarkItDown builds on): DOCX with python-docx
(heading styles → `#` lines, tables → Markdown tables), XLSX with openpyxl (one `# Sheet: …`
section per sheet, its cells a Markdown table), PPTX with python-pptx (one
`# Slide N: title` section per slide: text, tables, speaker notes)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

from app.convert.tables import markdown_table

_HEADING_STYLE = re.compile(r"^Heading (\d)$")


def _paragraph(paragraph: Any) -> str:
    text = " ".join(paragraph.text.split())
    if not text:
        return ""
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    if style == "Title":
        return f"# {text}"
    heading = _HEADING_STYLE.match(style)
    if heading:
        return f"{'#' * min(6, int(heading.group(1)))} {text}"
    if style.startswith("List"):
        return f"- {text}"
    return text


def _cell_rows(table: Any) -> Iterator[list[str]]:
    for row in table.rows:
        yield [cell.text for cell in row.cells]


def docx(raw: bytes) -> str:
    import docx as python_docx
    from docx.table import Table

    document = python_docx.Document(io.BytesIO(raw))
    blocks: list[str] = []
    title = (document.core_properties.title or "").strip()
    for item in document.iter_inner_content():
        block = markdown_table(_cell_rows(item)) if isinstance(item, Table) else _paragraph(item)
        if block:
            blocks.append(block)
    if title and not (blocks and blocks[0].startswith("# ")):
        blocks.insert(0, f"# {title}")
    return _join_lists(blocks)


def _join_lists(blocks: list[str]) -> str:
    """Consecutive list items on consecutive lines, other blocks separated by a blank line."""
    out: list[str] = []
    for block in blocks:
        if out and block.startswith("- ") and out[-1].startswith("- "):
            out[-1] += f"\n{block}"
        else:
            out.append(block)
    return "\n\n".join(out) + "\n"


def xlsx(raw: bytes) -> str:
    import openpyxl

    book = openpyxl.load_workbook(io.BytesIO(raw), read_only=True, data_only=True)
    try:
        sections = []
        for sheet in book.worksheets:
            table = markdown_table(sheet.iter_rows(values_only=True))
            if table:
                sections.append(f"# Sheet: {sheet.title}\n\n{table}")
    finally:
        book.close()
    return "\n\n".join(sections) + "\n"


def _shape_blocks(shape: Any) -> Iterator[str]:
    if shape.shape_type is not None and int(shape.shape_type) == 6:  # a group
        for inner in shape.shapes:
            yield from _shape_blocks(inner)
        return
    if getattr(shape, "has_table", False) and shape.has_table:
        rows = ([cell.text for cell in row.cells] for row in shape.table.rows)
        yield markdown_table(rows)
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        lines = [" ".join(p.text.split()) for p in shape.text_frame.paragraphs]
        text = "\n".join(line for line in lines if line)
        if text:
            yield text


def pptx(raw: bytes) -> str:
    from pptx import Presentation

    deck = Presentation(io.BytesIO(raw))
    sections = []
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text.split()) if title_shape is not None else ""
        blocks = [f"# Slide {number}: {title}" if title else f"# Slide {number}"]
        shapes = sorted(
            (s for s in slide.shapes if title_shape is None or s.shape_id != title_shape.shape_id),
            key=lambda s: (s.top or 0, s.left or 0),
        )
        for shape in shapes:
            blocks.extend(b for b in _shape_blocks(shape) if b)
        if slide.has_notes_slide:
            notes = " ".join(slide.notes_slide.notes_text_frame.text.split())
            if notes:
                blocks.append(f"Notes: {notes}")
        sections.append("\n\n".join(blocks))
    return "\n\n".join(sections) + "\n"
