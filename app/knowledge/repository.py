from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update

from app.db.base import utcnow
from app.kit.repository import RepositoryBase
from app.knowledge.models import KnowledgeBase, KnowledgeChunk, KnowledgeDocument

READY = "ready"
PENDING = "pending"
FAILED = "failed"


class KnowledgeBaseRepository(RepositoryBase[KnowledgeBase]):
    model = KnowledgeBase


class DocumentRepository(RepositoryBase[KnowledgeDocument]):
    model = KnowledgeDocument

    async def in_base(
        self, knowledge_base_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[KnowledgeDocument], int]:
        stmt = self.base_select().where(KnowledgeDocument.knowledge_base_id == knowledge_base_id)
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)

    async def versions_in(
        self, knowledge_base_ids: Sequence[uuid.UUID]
    ) -> list[tuple[uuid.UUID, datetime]]:
        """(id, last written) of the ready documents of these knowledge bases, sorted: the
        search index's cache key."""
        if not knowledge_base_ids:
            return []
        stmt = (
            select(KnowledgeDocument.id, KnowledgeDocument.updated_at)
            .where(
                KnowledgeDocument.knowledge_base_id.in_(knowledge_base_ids),
                KnowledgeDocument.status == READY,
            )
            .order_by(KnowledgeDocument.id)
        )
        return [(row[0], row[1]) for row in (await self.session.execute(stmt)).all()]

    async def finish(self, document_id: uuid.UUID, **values: Any) -> bool:
        """Set a document's state (ready with its text, or failed with the reason); False when
        it was deleted meanwhile."""
        stmt = (
            update(KnowledgeDocument)
            .where(KnowledgeDocument.id == document_id)
            .values(**values, updated_at=utcnow())
        )
        result = await self.session.execute(stmt)
        return bool(getattr(result, "rowcount", 0))

    async def listing(
        self, knowledge_base_ids: Sequence[uuid.UUID]
    ) -> Sequence[Row[uuid.UUID, str, str, int]]:
        """(knowledge base id, name, format, chars) of these bases' documents, by name."""
        if not knowledge_base_ids:
            return []
        stmt = (
            select(
                KnowledgeDocument.knowledge_base_id,
                KnowledgeDocument.name,
                KnowledgeDocument.format,
                KnowledgeDocument.chars,
            )
            .where(KnowledgeDocument.knowledge_base_id.in_(knowledge_base_ids))
            .order_by(KnowledgeDocument.knowledge_base_id, KnowledgeDocument.name)
        )
        return (await self.session.execute(stmt)).all()

    async def named(self, knowledge_base_id: uuid.UUID, name: str) -> KnowledgeDocument | None:
        return await self.get_by(knowledge_base_id=knowledge_base_id, name=name)


class ChunkRepository(RepositoryBase[KnowledgeChunk]):
    model = KnowledgeChunk

    async def of_document(self, document_id: uuid.UUID) -> list[KnowledgeChunk]:
        stmt = (
            select(KnowledgeChunk)
            .where(KnowledgeChunk.document_id == document_id)
            .order_by(KnowledgeChunk.position)
        )
        return list((await self.session.execute(stmt)).scalars().all())

    async def delete_of_document(self, document_id: uuid.UUID) -> None:
        """Explicit, so the chunks go on SQLite connections without foreign keys too."""
        await self.session.execute(
            delete(KnowledgeChunk).where(KnowledgeChunk.document_id == document_id)
        )

    async def insert_many(self, rows: Sequence[dict[str, Any]]) -> None:
        """One multi-row statement (Core, no unit of work: thousands of chunks stay cheap)."""
        if rows:
            await self.session.execute(insert(KnowledgeChunk), [dict(r) for r in rows])

    async def for_search(
        self, document_ids: Sequence[uuid.UUID]
    ) -> Sequence[Row[uuid.UUID, uuid.UUID, str, str, int, int, str, bytes]]:
        """(knowledge base id, document id, document name, heading, position, offset, text,
        embedding) of every chunk of these documents."""
        stmt = (
            select(
                KnowledgeChunk.knowledge_base_id,
                KnowledgeChunk.document_id,
                KnowledgeDocument.name,
                KnowledgeChunk.heading,
                KnowledgeChunk.position,
                KnowledgeChunk.offset,
                KnowledgeChunk.text,
                KnowledgeChunk.embedding,
            )
            .join(KnowledgeDocument, KnowledgeDocument.id == KnowledgeChunk.document_id)
            .where(KnowledgeChunk.document_id.in_(document_ids))
            .order_by(KnowledgeDocument.name, KnowledgeChunk.position, KnowledgeChunk.id)
        )
        return (await self.session.execute(stmt)).all()
