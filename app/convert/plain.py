"""Plain text from the HTML some tool descriptions carry (Stripe's `<p>`, `<a>`, `<code>`).

Used for what a model reads about a tool: OpenAPI operation and parameter descriptions and
MCP tool descriptions. Text without HTML tags is returned as it is (Markdown stays Markdown;
a `<branch name>` placeholder is not a tag); text that contains a known HTML element goes
through the one HTML converter (`app/convert/html.py`, lxml): links keep their text, list
items become `- ` lines, scripts and styles are dropped, entities are decoded.
"""

from __future__ import annotations

import re

from app.convert.html import html_to_markdown

_TAGS = (
    "a|abbr|b|blockquote|br|code|dd|div|dl|dt|em|h[1-6]|hr|i|img|kbd|li|ol|p|pre|"
    "section|small|span|strong|sub|sup|table|tbody|td|th|thead|tr|u|ul|script|style"
)
_HAS_HTML = re.compile(rf"</?(?:{_TAGS})(?:\s[^<>]*)?/?>", re.IGNORECASE)


def looks_like_html(text: str) -> bool:
    return "<" in text and _HAS_HTML.search(text) is not None


def plain_text(text: str) -> str:
    """`text` without its HTML (see the module docstring); other text unchanged."""
    if not text or not looks_like_html(text):
        return text
    return html_to_markdown(text).strip()
