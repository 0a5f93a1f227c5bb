"""Knowledge bases, their documents, and the chunks retrieval searches (docs/contract.md §12)."""

from __future__ import annotations

import uuid

from sqlalchemy import (
    BigInteger,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    Uuid,
    func,
    select,
)
from sqlalchemy.orm import Mapped, column_property, mapped_column

from app.db.base import Base, IdMixin, TimestampMixin


class KnowledgeDocument(IdMixin, TimestampMixin, Base):
    """One added document, kept as text (every format is converted on the way in)."""

    __tablename__ = "knowledge_documents"
    __table_args__ = (UniqueConstraint("knowledge_base_id", "name"),)

    knowledge_base_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("knowledge_bases.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(256))
    """The source every chunk cites (a file name, or the name the client gave)."""
    format: Mapped[str] = mapped_column(String(16))
    """The format it was sent in (`app/convert/formats.py`); `text` below is what was
    chunked (Markdown-like, whatever the format)."""
    text: Mapped[str] = mapped_column(Text)
    chars: Mapped[int] = mapped_column(Integer)
    chunk_count: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="ready", server_default="ready")
    """`pending` while a large document is ingested in the background, then `ready` (searched)
    or `failed` (`error` says why)."""
    error: Mapped[str | None] = mapped_column(Text, default=None)
    source_url: Mapped[str | None] = mapped_column(Text, default=None)
    """The page it was fetched from (`{url}` documents; `…/refresh` fetches it again)."""
    size_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    """Bytes of the file or page as sent (before conversion)."""


class KnowledgeChunk(IdMixin, Base):
    """A piece of a document: its heading path and character offset say where it comes from.

    `embedding` is the WordLlama vector as float16 bytes, stored so that retrieval never
    re-embeds after a restart.
    """

    __tablename__ = "knowledge_chunks"

    document_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("knowledge_documents.id", ondelete="CASCADE"), index=True
    )
    knowledge_base_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("knowledge_bases.id", ondelete="CASCADE"), index=True
    )
    position: Mapped[int] = mapped_column(Integer)
    """Order in the document, from 0."""
    heading: Mapped[str] = mapped_column(Text, default="")
    """The heading path, outermost first, joined with " > " (empty before the first heading)."""
    offset: Mapped[int] = mapped_column(Integer)
    """Character offset of the chunk in the document's `text`."""
    text: Mapped[str] = mapped_column(Text)
    embedding: Mapped[bytes] = mapped_column(LargeBinary)


class KnowledgeBase(TimestampMixin, Base):
    __tablename__ = "knowledge_bases"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    document_count: Mapped[int] = column_property(
        select(func.count(KnowledgeDocument.id))
        .where(KnowledgeDocument.knowledge_base_id == id)
        .correlate_except(KnowledgeDocument)
        .scalar_subquery()
    )
    """Counted on every load, so it is never stale (shown in the `knowledge` tool's stub)."""
