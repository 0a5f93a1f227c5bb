"""Plain text from the HTML some API descriptions carry (Stripe's `<p>`, `<a>`, `<code>`).

Used for what a model reads about a tool: OpenAPI operation and parameter descriptions and
MCP tool descriptions. Text without HTML tags is returned as it is (Markdown stays Markdown;
a `<branch name>` placeholder is not a tag), so only text that contains a known HTML
element is parsed (selectolax's Lexbor engine, C, tolerant of broken markup). Links keep
their text; block elements (`p`, `li`, `br`, headings, table rows) end a line and list
items start with `- `; `script`/`style` content is dropped; entities are decoded.
"""

from __future__ import annotations

import re

from selectolax.lexbor import LexborHTMLParser

_TAGS = (
    "a|abbr|b|blockquote|br|code|dd|div|dl|dt|em|h[1-6]|hr|i|img|kbd|li|ol|p|pre|"
    "section|small|span|strong|sub|sup|table|tbody|td|th|thead|tr|u|ul|script|style"
)
_HAS_HTML = re.compile(rf"</?(?:{_TAGS})(?:\s[^<>]*)?/?>", re.IGNORECASE)
_BLOCKS = "p, div, section, blockquote, pre, h1, h2, h3, h4, h5, h6, tr, dt, dd, ul, ol, table"
_BREAK = "\ue000"
"""A private-use character marking a line break while whitespace is collapsed."""
_SPACES = re.compile(r"[ \t\r\n\f\v]+")
_AROUND_BREAK = re.compile(rf" ?{_BREAK} ?")
_MANY_BREAKS = re.compile(rf"{_BREAK}{{3,}}")


def looks_like_html(text: str) -> bool:
    return "<" in text and _HAS_HTML.search(text) is not None


def plain_text(text: str) -> str:
    """`text` without its HTML (see the module docstring); other text unchanged."""
    if not text or not looks_like_html(text):
        return text
    tree = LexborHTMLParser(text)
    root = tree.body
    if root is None:
        return text
    for node in root.css("script, style"):
        node.decompose()
    for node in root.css("br"):
        node.insert_after(_BREAK)
    for node in root.css("li"):
        node.insert_before(f"{_BREAK}- ")
    for node in root.css(_BLOCKS):
        node.insert_before(_BREAK * 2)
        node.insert_after(_BREAK * 2)
    flat = _SPACES.sub(" ", root.text(separator="", deep=True))
    flat = _AROUND_BREAK.sub(_BREAK, flat)
    flat = _MANY_BREAKS.sub(_BREAK * 2, flat).strip(f" {_BREAK}")
    return flat.replace(_BREAK, "\n")
