"""What a document is before chunking: its format, and its text (HTML converted with the
standard library's `html.parser`, headings kept as Markdown `#` lines so one chunker serves
every format)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import PurePosixPath
from typing import Literal

from app.errors import Invalid
from app.kit.request_guard import NUL_MESSAGE

Format = Literal["text", "markdown", "html"]
FORMATS: tuple[Format, ...] = ("text", "markdown", "html")

_EXTENSIONS: dict[str, Format] = {
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
}
_CONTENT_TYPES: dict[str, Format] = {
    "text/plain": "text",
    "text/markdown": "markdown",
    "text/x-markdown": "markdown",
    "text/html": "html",
    "application/xhtml+xml": "html",
}
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "nav", "head", "button"})
_FENCE = "```"
_SPACES = re.compile(r"\s+")
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt",
        "figcaption", "figure", "footer", "header", "hr", "li", "main", "ol", "p",
        "section", "table", "tr", "ul",
    }
)  # fmt: skip


def detect_format(filename: str | None, content_type: str | None) -> Format:
    """The format of an uploaded file, from its extension, else its content type."""
    suffix = PurePosixPath(filename or "").suffix.lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    base = (content_type or "").split(";")[0].strip().lower()
    if base in _CONTENT_TYPES:
        return _CONTENT_TYPES[base]
    if base.startswith("text/") or not suffix:
        return "text"
    raise Invalid(
        f"file: cannot tell the format of {filename!r}; send text, Markdown or HTML "
        "(.txt, .md, .html) or pass format"
    )


def decode(raw: bytes, *, field: str = "file") -> str:
    """UTF-8 (a BOM is dropped); anything else is a 422, never a guess."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Invalid(
            f"{field}: not UTF-8 text (byte {exc.start}); send text, Markdown or HTML"
        ) from exc
    if "\x00" in text:
        raise Invalid(f"{field}: {NUL_MESSAGE}")
    return text


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._pre = 0
        self._in_title = False
        self._heading: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED:
            self._skip += 1
        elif self._skip:
            return
        elif tag in _HEADINGS:
            self._heading = []
        elif tag == "pre":
            self._pre += 1
            self.parts.append(f"\n\n{_FENCE}\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif self._skip:
            return
        elif tag in _HEADINGS and self._heading is not None:
            heading = " ".join("".join(self._heading).split())
            self._heading = None
            if heading:
                self.parts.append(f"\n\n{'#' * _HEADINGS[tag]} {heading}\n\n")
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
            self.parts.append(f"\n{_FENCE}\n\n")
        elif tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif self._skip:
            return
        elif self._heading is not None:
            self._heading.append(data)
        elif self._pre:
            self.parts.append(data)
        else:
            self.parts.append(_SPACES.sub(" ", data))


def html_to_text(html: str) -> str:
    """Readable text with `#` headings and fenced `<pre>` blocks; scripts, styles, navigation
    dropped."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    out: list[str] = []
    fenced = False
    for raw in "".join(parser.parts).splitlines():
        line = raw.rstrip()
        if line == _FENCE:
            fenced = not fenced
        elif not fenced:
            line = line.strip()
            if line == "-":
                continue
        if line or (out and out[-1]):
            out.append(line)
    text = "\n".join(out).strip()
    title = " ".join(parser.title.split())
    if title and not text.startswith("# "):
        text = f"# {title}\n\n{text}"
    return text + "\n"


def as_text(content: str, fmt: Format) -> str:
    """The text that is stored and chunked."""
    return html_to_text(content) if fmt == "html" else content.replace("\r\n", "\n")
