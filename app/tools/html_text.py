"""Readable text from HTML with the standard library: scripts and styles dropped, title kept."""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

_BREAK = "\x00"
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg"})
_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "tr",
        "ul",
    }
)


@dataclass(frozen=True, kw_only=True)
class PageText:
    title: str
    text: str


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIPPED:
            self._skip += 1
        elif tag in _BLOCKS:
            self.parts.append(_BREAK)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCKS:
            self.parts.append(_BREAK)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> PageText:
    """Title plus body text: one line per block element, whitespace collapsed inside it."""
    parser = _Extractor()
    parser.feed(html)
    parser.close()
    lines = (" ".join(chunk.split()) for chunk in "".join(parser.parts).split(_BREAK))
    text = "\n".join(line for line in lines if line)
    return PageText(title=" ".join("".join(parser.title).split()), text=text)
