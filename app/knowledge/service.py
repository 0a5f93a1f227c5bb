"""Knowledge bases (CRUD) and their documents: list, read, delete (adding them: `ingest.py`).

See docs/contract.md §12.
"""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Invalid, NotFound
from app.kit.crud import CrudService
from app.knowledge.backend import KnowledgeBackend
from app.knowledge.models import KnowledgeBase, KnowledgeChunk, KnowledgeDocument
from app.knowledge.repository import (
    ChunkRepository,
    DocumentRepository,
    KnowledgeBaseRepository,
)
from app.knowledge.schemas import (
    KnowledgeBaseCreate,
    KnowledgeBaseUpdate,
    SearchHit,
    SearchResults,
)


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

    # --- documents (adding them: `ingest.py`) ----------------------------------------------

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

    async def search(
        self,
        session: AsyncSession,
        backend: KnowledgeBackend,
        id: uuid.UUID,
        *,
        query: str,
        limit: int,
    ) -> SearchResults:
        """What the `knowledge` tool would find in this base: chunks, source, score."""
        base = await self.get(session, id)
        if not query.strip():
            raise Invalid("query: must not be blank")
        hits = await backend.search(knowledge_base_ids=[base.id], query=query, limit=limit)
        results = []
        for rank, hit in enumerate(hits, start=1):
            chunk = hit.chunk
            where = f" > {chunk.heading}" if chunk.heading else ""
            results.append(
                SearchHit(
                    rank=rank,
                    score=hit.score,
                    source=f"{base.name}/{chunk.document}{where}",
                    document=chunk.document,
                    document_id=chunk.document_id,
                    heading=chunk.heading,
                    offset=chunk.offset,
                    text=chunk.text,
                )
            )
        return SearchResults(query=query, knowledge_base=base.name, results=results)


knowledge_base_service = KnowledgeBaseService()
