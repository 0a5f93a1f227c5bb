from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import StringConstraints

from app.convert.formats import Format
from app.kit.schemas import ReadSchema, Schema, ShortText, Slug

DocumentName = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256, pattern=r"\S")
]
"""The source chunks cite: a file name or any short label."""


class KnowledgeBaseCreate(Schema):
    name: Slug
    description: ShortText = ""


class KnowledgeBaseUpdate(Schema):
    name: Slug | None = None
    description: ShortText | None = None


class KnowledgeBaseRead(ReadSchema):
    name: str
    description: str
    document_count: int


class DocumentCreate(Schema):
    """A document sent as JSON (a file upload carries the same fields as form parts)."""

    name: DocumentName
    text: str
    """The content: plain text, Markdown, HTML, CSV or JSON (converted to searchable text)."""
    format: Format = "text"
    replace: bool = False
    """Replace the document of that name (it keeps its id) instead of answering 409."""


class DocumentImport(Schema):
    """A page or file fetched by URL (through the egress guard) and stored like an upload."""

    url: Annotated[
        str,
        StringConstraints(
            strip_whitespace=True, max_length=2048, pattern=r"^[Hh][Tt][Tt][Pp][Ss]?://\S+$"
        ),
    ]
    name: DocumentName | None = None
    """The source chunks cite; the URL (without query) when absent."""
    format: Format | None = None
    """Told by the URL's extension, else the response's content type, when absent."""
    replace: bool = False


class DocumentRead(ReadSchema):
    knowledge_base_id: uuid.UUID
    name: str
    format: str
    status: str
    """`ready` (searched), `pending` (being ingested) or `failed` (`error` says why)."""
    error: str | None
    source_url: str | None
    """The URL a `{url}` document was fetched from (`…/refresh` fetches it again)."""
    size_bytes: int
    """Bytes of the file or page as sent."""
    chars: int
    """Characters of the stored text (after conversion)."""
    chunk_count: int


class ChunkRead(Schema):
    position: int
    heading: str
    """The heading path, outermost first, joined with " > "."""
    offset: int
    """Character offset in the document's `text`."""
    text: str


class DocumentDetail(DocumentRead):
    text: str
    chunks: list[ChunkRead]


class DocumentPage(Schema):
    items: list[DocumentRead]
    total: int
    limit: int
    offset: int


class SearchHit(Schema):
    rank: int
    score: float
    """Absolute relevance in [0, 1] (what an agent's `knowledge.min_score` is compared with)."""
    source: str
    """`knowledge base/document > heading path`, as the `knowledge` tool cites it."""
    document: str
    document_id: uuid.UUID
    heading: str
    """The heading path (a PDF page, a slide, a sheet, the document's own headings)."""
    offset: int
    text: str


class SearchResults(Schema):
    query: str
    knowledge_base: str
    results: list[SearchHit]


__all__ = [
    "ChunkRead",
    "DocumentCreate",
    "DocumentDetail",
    "DocumentImport",
    "DocumentPage",
    "DocumentRead",
    "KnowledgeBaseCreate",
    "KnowledgeBaseRead",
    "KnowledgeBaseUpdate",
    "SearchHit",
    "SearchResults",
]
