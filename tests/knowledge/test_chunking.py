"""Chunking by headings and size, and HTML to text, on real documents and small edge cases."""

from __future__ import annotations

import pytest

from app.convert.formats import decode, detect_format
from app.convert.html import html_to_markdown
from app.errors import Invalid
from app.knowledge.chunking import chunk_document
from tests.knowledge.test_router import DATA


def test_every_chunk_is_found_at_its_offset_and_fits() -> None:
    for path in sorted(DATA.rglob("*.txt")):
        text = path.read_text()
        chunks = chunk_document(text, "text", max_chars=500)
        assert chunks, path
        for chunk in chunks:
            assert text[chunk.offset : chunk.offset + len(chunk.text)] == chunk.text
            assert len(chunk.text) <= 500
        assert [c.offset for c in chunks] == sorted(c.offset for c in chunks)


def test_rst_underlines_nest_in_order_of_first_use() -> None:
    text = (DATA / "python-reference" / "typesmapping.txt").read_text()
    headings = {c.heading for c in chunk_document(text, "text")}
    assert headings == {
        ('Mapping Types — "dict"',),
        ('Mapping Types — "dict"', "Dictionary view objects"),
    }


def test_markdown_atx_setext_and_fences() -> None:
    text = (
        "Guide\n=====\n\nIntro.\n\nSetup\n-----\n\n```sh\n# not a heading\npip install x\n```\n\n"
        "### Deep\n\nDeep text.\n\n## Back up\n\nMore.\n"
    )
    chunks = chunk_document(text, "markdown")
    assert [(c.heading, c.text[:12]) for c in chunks] == [
        (("Guide",), "Intro."),
        (("Guide", "Setup"), "```sh\n# not "),
        (("Guide", "Setup", "Deep"), "Deep text."),
        (("Guide", "Back up"), "More."),
    ]
    # in plain text a `#` line is text, not a heading
    assert [c.heading for c in chunk_document("# x\n\nbody\n", "text")] == [()]


def test_long_sections_are_cut_at_paragraphs_then_words() -> None:
    paragraph = " ".join(f"word{i}" for i in range(60))  # ~ 470 characters
    text = "# Title\n\n" + "\n\n".join([paragraph] * 5) + "\n\n" + "x" * 50 + " " + "y" * 900
    chunks = chunk_document(text, "markdown", max_chars=1000)
    assert all(len(c.text) <= 1000 for c in chunks)
    assert all(c.heading == ("Title",) for c in chunks)
    assert chunks[0].text == f"{paragraph}\n\n{paragraph}"  # two whole paragraphs fit
    assert all(text[c.offset : c.offset + len(c.text)] == c.text for c in chunks)
    assert "".join(c.text for c in chunks).replace("\n", "").replace(" ", "") == (
        text[9:].replace("\n", "").replace(" ", "")
    )


def test_html_keeps_headings_and_code_and_drops_scripts() -> None:
    html = (DATA / "rustdoc-how-to-write-documentation.html").read_text()
    text = html_to_markdown(html)
    assert "<script" not in text
    assert "localStorage" not in text  # inline JavaScript is dropped
    assert "## Documenting components" in text
    assert "```\n" in text
    chunks = chunk_document(text, "html")
    assert ("How to write documentation", "Markdown", "Tables") in {c.heading for c in chunks}
    tiny = html_to_markdown(
        "<html><head><title>T</title><style>p{}</style></head><body><p>a <b>bold</b> "
        "word</p><pre># kept\n  indented</pre><h2>Sub</h2><ul><li>one</li></ul></body></html>"
    )
    assert tiny == "# T\n\na bold word\n\n```\n# kept\n  indented\n```\n\n## Sub\n\n- one\n"


def test_format_detection_and_decoding() -> None:
    assert detect_format("a.MD", None) == "markdown"
    assert detect_format("page.htm", "application/octet-stream") == "html"
    assert detect_format("notes", "text/markdown; charset=utf-8") == "markdown"
    assert detect_format("LICENSE", None) == "text"
    assert detect_format("x.csv", "text/csv") == "csv"
    assert detect_format("x.pdf", "application/octet-stream") == "pdf"
    assert detect_format("report", "application/pdf") == "pdf"
    with pytest.raises(Invalid, match="format"):
        detect_format("x.bin", "application/octet-stream")
    assert decode("\ufeffhé".encode()) == "hé"
    with pytest.raises(Invalid, match="UTF-8"):
        decode(b"\xff\xfe")
