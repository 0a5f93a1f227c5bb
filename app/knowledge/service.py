"""Knowledge bases (CRUD) and their documents: add (parse, chunk, embed), list, read, delete.

See docs/contract.md §12.
"""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Conflict, Invalid, NotFound, PayloadTooLarge
from app.kit.crud import CrudService
from app.knowledge.chunking import Chunk, chunk_document
from app.knowledge.documents import as_text
from app.knowledge.index import chunk_fields_text
from app.knowledge.models import KnowledgeBase, KnowledgeChunk, KnowledgeDocument
from app.knowledge.repository import (
    ChunkRepository,
    DocumentRepository,
    KnowledgeBaseRepository,
)
from app.knowledge.schemas import DocumentCreate, KnowledgeBaseCreate, KnowledgeBaseUpdate
from app.retrieval.embedding import Embedder, to_bytes

MAX_DOCUMENT_BYTES = 2_000_000
"""A larger document is a 413: split it, or add its parts as separate documents."""


def _embed(texts: list[str]) -> list[bytes]:
    return [to_bytes(row) for row in Embedder.embed(texts)]


class KnowledgeBaseService(CrudService[KnowledgeBase]):
    repository = KnowledgeBaseRepository
    label = "knowledge base"

    async def create(self, session: AsyncSession, data: KnowledgeBaseCreate) -> KnowledgeBase:
        await self.ensure_name_free(session, data.name)
        base = await self.save(session, KnowledgeBase(**data.model_dump()))
        await session.refresh(base, ["document_count"])
        return base

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: KnowledgeBaseUpdate
    ) -> KnowledgeBase:
        base = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        self.apply(base, data)
        await self.save(session, base)
        await session.refresh(base, ["document_count"])  # a flush expires the count
        return base

    # --- documents ------------------------------------------------------------------------

    async def add_document(
        self, session: AsyncSession, id: uuid.UUID, data: DocumentCreate
    ) -> KnowledgeDocument:
        """Store the document, its chunks and their embeddings (409 on a taken name)."""
        await self.get(session, id)
        size = len(data.text.encode("utf-8"))
        if size > MAX_DOCUMENT_BYTES:
            raise PayloadTooLarge(
                f"text: the document is {size} bytes; at most {MAX_DOCUMENT_BYTES} are accepted"
            )
        documents = DocumentRepository(session)
        if await documents.get_by(knowledge_base_id=id, name=data.name) is not None:
            raise Conflict(f"a document named {data.name!r} already exists in this knowledge base")
        text = as_text(data.text, data.format)
        chunks = chunk_document(text, data.format)
        if not chunks:
            raise Invalid("text: the document has no text to search")
        vectors = await asyncio.to_thread(
            _embed, [chunk_fields_text(data.name, c.heading_path, c.text) for c in chunks]
        )
        document = KnowledgeDocument(
            knowledge_base_id=id,
            name=data.name,
            format=data.format,
            text=text,
            chars=len(text),
            chunk_count=len(chunks),
        )
        await self.save_document(session, document, chunks, vectors)
        return document

    async def save_document(
        self,
        session: AsyncSession,
        document: KnowledgeDocument,
        chunks: list[Chunk],
        vectors: list[bytes],
    ) -> None:
        try:
            async with session.begin_nested():
                session.add(document)
                await session.flush()
        except IntegrityError as exc:
            raise Conflict(f"document {document.name!r} conflicts with an existing one") from exc
        session.add_all(
            KnowledgeChunk(
                document_id=document.id,
                knowledge_base_id=document.knowledge_base_id,
                position=position,
                heading=chunk.heading_path,
                offset=chunk.offset,
                text=chunk.text,
                embedding=vector,
            )
            for position, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
        )
        await session.flush()

    async def list_documents(
        self, session: AsyncSession, id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[KnowledgeDocument], int]:
        await self.get(session, id)
        return await DocumentRepository(session).in_base(id, limit=limit, offset=offset)

    async def get_document(
        self, session: AsyncSession, id: uuid.UUID, document_id: uuid.UUID
    ) -> KnowledgeDocument:
        await self.get(session, id)
        document = await DocumentRepository(session).get(document_id)
        if document is None or document.knowledge_base_id != id:
            raise NotFound(f"document {str(document_id)!r} not found in this knowledge base")
        return document

    async def chunks(self, session: AsyncSession, document_id: uuid.UUID) -> list[KnowledgeChunk]:
        return await ChunkRepository(session).of_document(document_id)

    async def delete_document(
        self, session: AsyncSession, id: uuid.UUID, document_id: uuid.UUID
    ) -> None:
        """The document and every chunk of it."""
        document = await self.get_document(session, id, document_id)
        await ChunkRepository(session).delete_of_document(document.id)
        await DocumentRepository(session).delete(document)


knowledge_base_service = KnowledgeBaseService()
