"""HTML to Markdown-like text with lxml (libxml2's HTML parser, C, linear in the input).

One implementation for every HTML Quiver reads: `http_fetch` pages, knowledge documents,
EPUB chapters. Headings become `#` lines (the chunker's heading path), `<pre>` a fenced block,
list items `- ` lines, tables Markdown tables; scripts, styles, navigation and forms are
dropped. The walk is iterative (`iterwalk`), so depth costs no recursion; libxml2 stops
descending below its depth limit (`huge_tree`: 2,048 levels), which no real page reaches.

Runs in the conversion workers (`pool.py`), never on the event loop: even a linear parse of a
large page is CPU the loop must not spend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lxml import etree

from app.convert.tables import markdown_table

FENCE = "```"
_SKIPPED = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "nav", "head", "button",
        "form", "select", "iframe", "object", "embed", "canvas", "dialog",
    }
)  # fmt: skip
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "dd", "details", "div", "dl", "dt",
        "fieldset", "figcaption", "figure", "footer", "header", "hr", "main", "ol", "p",
        "section", "summary", "ul", "body",
    }
)  # fmt: skip
_SPACES = re.compile(r"\s+")
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]{0,200}\?>")


@dataclass(frozen=True, slots=True)
class Page:
    title: str
    text: str


def _parser() -> Any:
    return etree.HTMLParser(
        huge_tree=True, remove_comments=True, remove_pis=True, no_network=True, recover=True
    )


def _words(element: Any) -> str:
    return " ".join("".join(element.itertext()).split())


def _rows(table: Any) -> list[list[str]]:
    """The rows of this table only (a nested table's text stays in its cell)."""
    rows: list[list[str]] = []
    for child in table:
        tag = child.tag if isinstance(child.tag, str) else ""
        group = child if tag in ("thead", "tbody", "tfoot") else None
        for row in group if group is not None else (child,):
            if isinstance(row.tag, str) and row.tag == "tr":
                rows.append([_words(cell) for cell in row if cell.tag in ("td", "th")])
    return rows


class _Writer:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def inline(self, text: str | None) -> None:
        if text:
            self.parts.append(_SPACES.sub(" ", text))

    def block(self, text: str = "") -> None:
        self.parts.append(f"\n\n{text}\n\n" if text else "\n\n")

    def text(self) -> str:
        out: list[str] = []
        fenced = False
        for raw in "".join(self.parts).splitlines():
            line = raw.rstrip()
            if line == FENCE:
                fenced = not fenced
            elif not fenced:
                line = line.strip()
                if line == "-":
                    continue
            if line or (out and out[-1]):
                out.append(line)
        return "\n".join(out).strip()


def _walk(root: Any, writer: _Writer) -> None:
    walker = etree.iterwalk(root, events=("start", "end"))
    for event, element in walker:
        tag = element.tag.lower() if isinstance(element.tag, str) else ""
        if event == "end":
            if tag in _BLOCKS:
                writer.block()
            writer.inline(element.tail)
            continue
        if tag in _SKIPPED or not tag:
            walker.skip_subtree()
        elif tag in _HEADINGS:
            heading = _words(element)
            writer.block(f"{'#' * _HEADINGS[tag]} {heading}" if heading else "")
            walker.skip_subtree()
        elif tag == "pre":
            code = "".join(element.itertext()).strip("\n")
            writer.parts.append(f"\n\n{FENCE}\n{code}\n{FENCE}\n\n")
            walker.skip_subtree()
        elif tag == "table":
            writer.block(markdown_table(_rows(element)))
            walker.skip_subtree()
        else:
            if tag == "li":
                writer.parts.append("\n- ")
            elif tag in ("br", "tr"):
                writer.parts.append("\n")
            elif tag in _BLOCKS:
                writer.block()
            writer.inline(element.text)


def html_to_page(html: str) -> Page:
    """The page's title and its text (Markdown-like)."""
    source = _XML_DECLARATION.sub("", html, count=1)
    if not source.strip():
        return Page(title="", text="")
    root = etree.fromstring(source, _parser())
    if root is None:
        return Page(title="", text="")
    title = " ".join((root.findtext(".//title") or "").split())
    writer = _Writer()
    _walk(root, writer)
    return Page(title=title, text=writer.text())


def html_to_markdown(html: str) -> str:
    """The page as one document: its title as the first heading unless it starts with one."""
    page = html_to_page(html)
    text = page.text
    if page.title and not text.startswith("# "):
        text = f"# {page.title}\n\n{text}" if text else f"# {page.title}"
    return text + "\n" if text else ""
