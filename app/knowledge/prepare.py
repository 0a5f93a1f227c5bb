"""What runs in a conversion worker for a knowledge document: the file to text
(`app/convert`), the text to chunks. Nothing here touches the event loop or the database."""

from __future__ import annotations

from dataclasses import dataclass

from app.convert.formats import Format, convert
from app.errors import Invalid
from app.knowledge.chunking import Chunk, chunk_document


@dataclass(frozen=True, slots=True)
class Prepared:
    text: str
    """The document as stored: Markdown-like text whatever the format."""
    chunks: list[Chunk]


def prepare(raw: bytes, fmt: Format) -> Prepared:
    text = convert(raw, fmt)
    chunks = chunk_document(text, fmt)
    if not chunks:
        raise Invalid("file: the document has no text to search")
    return Prepared(text=text, chunks=chunks)
