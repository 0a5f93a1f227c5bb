"""Paged and packaged documents: PDF with pypdf (one `# Page N` section per page with text,
so a citation names its page) and EPUB with EbookLib (the spine's chapters in reading order,
each through the one HTML converter)."""

from __future__ import annotations

import io
import warnings

from app.convert.html import html_to_markdown
from app.errors import Invalid

SCANNED = (
    "file: the PDF has {pages} page(s) but no text layer (a scanned document?); text "
    "recognition (OCR) is not available here: send a PDF with selectable text, or its text"
)


def pdf(raw: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    reader = PdfReader(io.BytesIO(raw))
    if reader.is_encrypted and not reader.decrypt(""):
        raise Invalid("file: the PDF is encrypted with a password; send it unencrypted")
    sections = []
    try:
        for number, page in enumerate(reader.pages, start=1):
            text = "\n".join(line.rstrip() for line in (page.extract_text() or "").splitlines())
            if text.strip():
                sections.append(f"# Page {number}\n\n{text.strip()}")
    except FileNotDecryptedError as exc:
        raise Invalid("file: the PDF is encrypted with a password; send it unencrypted") from exc
    if not sections:
        raise Invalid(SCANNED.format(pages=len(reader.pages)))
    return "\n\n".join(sections) + "\n"


def epub(raw: bytes) -> str:
    from ebooklib import ITEM_DOCUMENT
    from ebooklib import epub as ebooklib_epub

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = ebooklib_epub.read_epub(io.BytesIO(raw), options={"ignore_ncx": True})
    chapters = []
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ITEM_DOCUMENT:
            continue
        text = html_to_markdown(item.get_content().decode("utf-8", "replace")).strip()
        if text:
            chapters.append(text)
    if not chapters:
        raise Invalid("file: the EPUB has no readable chapters")
    title = next(iter(book.get_metadata("DC", "title")), ("", {}))[0]
    body = "\n\n".join(chapters)
    if title and not body.startswith("# "):
        body = f"# {title}\n\n{body}"
    return body + "\n"
