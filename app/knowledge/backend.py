"""The `knowledge` tool's back-end: hybrid search over the chunks of some knowledge bases.

Each process keeps a few built indexes, keyed by the exact set of ready documents they cover
and when each was last written: adding, replacing, finishing or deleting a document changes
the key, so a stale index is never used. Embeddings
come from the rows, so a restart rebuilds an index without embedding anything again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.kit.lru import Lru
from app.knowledge.index import ChunkIndex, Hit, IndexedChunk
from app.knowledge.repository import ChunkRepository, DocumentRepository

_CACHE_SIZE = 16


class KnowledgeBackend(Protocol):
    """What the `knowledge` tool calls (implemented by `KnowledgeSearch`)."""

    async def search(
        self, *, knowledge_base_ids: Sequence[uuid.UUID], query: str, limit: int
    ) -> list[Hit]: ...


class KnowledgeSearch:
    def __init__(self, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self._sessionmaker = sessionmaker
        self._indexes: Lru[tuple[tuple[uuid.UUID, datetime], ...], ChunkIndex] = Lru(_CACHE_SIZE)

    async def index_for(self, knowledge_base_ids: Sequence[uuid.UUID]) -> ChunkIndex:
        """The index over every document of these knowledge bases (built on a miss)."""
        async with self._sessionmaker() as session:
            key = tuple(await DocumentRepository(session).versions_in(knowledge_base_ids))
            cached = self._indexes.get(key)
            if cached is not None:
                return cached
            ids = [document_id for document_id, _ in key]
            rows = await ChunkRepository(session).for_search(ids) if ids else []
        chunks = [
            IndexedChunk(
                knowledge_base_id=kb,
                document_id=document_id,
                document=document,
                heading=heading,
                position=position,
                offset=offset,
                text=text,
            )
            for kb, document_id, document, heading, position, offset, text, _ in rows
        ]
        embeddings = [row[7] for row in rows]
        index = await asyncio.to_thread(ChunkIndex, chunks, embeddings)
        return self._indexes.put(key, index)

    async def search(
        self, *, knowledge_base_ids: Sequence[uuid.UUID], query: str, limit: int
    ) -> list[Hit]:
        index = await self.index_for(knowledge_base_ids)
        return await asyncio.to_thread(index.search, query, limit=limit)
