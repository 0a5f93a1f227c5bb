"""HTML descriptions → plain text (one helper for OpenAPI and MCP tool descriptions)."""

from __future__ import annotations

import pytest

from app.convert.plain import plain_text


def test_stripe_style_html_becomes_plain_text_with_links_as_text() -> None:
    html = (
        '<p>Returns a list of <a href="/docs/api/customers">customers</a> '
        "sorted by <code>created</code>.</p>\n<p>See also &amp; note:</p>"
        "<ul><li>one</li><li>two <strong>bold</strong></li></ul>tail<br/>next"
        "<script>alert(1)</script>"
    )
    assert plain_text(html) == (
        "Returns a list of customers sorted by created.\n\n"
        "See also & note:\n\n"
        "- one\n- two bold\n\n"
        "tail\nnext"
    )


@pytest.mark.parametrize(
    "text",
    [
        "The `:ref` must be formatted as `heads/<branch name>`.",
        "**Markdown** stays\n\n- as it is",
        "a < b and b > c",
        "",
    ],
)
def test_text_without_html_is_unchanged(text: str) -> None:
    assert plain_text(text) == text


def test_broken_markup_still_yields_its_text() -> None:
    assert plain_text("<p>unclosed <b>bold <i>and</p> more") == "unclosed bold and\n\nmore"
