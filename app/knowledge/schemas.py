from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import StringConstraints

from app.kit.schemas import ReadSchema, Schema, ShortText, Slug
from app.knowledge.documents import Format

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
    """The content: plain text, Markdown or HTML (HTML is converted to text)."""
    format: Format = "text"


class DocumentRead(ReadSchema):
    knowledge_base_id: uuid.UUID
    name: str
    format: str
    chars: int
    """Characters of the stored text (HTML after conversion)."""
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


__all__ = [
    "ChunkRead",
    "DocumentCreate",
    "DocumentDetail",
    "DocumentPage",
    "DocumentRead",
    "KnowledgeBaseCreate",
    "KnowledgeBaseRead",
    "KnowledgeBaseUpdate",
]
