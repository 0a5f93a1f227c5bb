"""The `knowledge` tool's back-end: hybrid search over the chunks of some knowledge bases.

Each process keeps a few built indexes, keyed by the exact set of documents they cover:
adding or deleting a document changes the key, so a stale index is never used. Embeddings
come from the rows, so a restart rebuilds an index without embedding anything again.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
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
        self._indexes: Lru[tuple[uuid.UUID, ...], ChunkIndex] = Lru(_CACHE_SIZE)

    async def index_for(self, knowledge_base_ids: Sequence[uuid.UUID]) -> ChunkIndex:
        """The index over every document of these knowledge bases (built on a miss)."""
        async with self._sessionmaker() as session:
            key = tuple(await DocumentRepository(session).ids_in(knowledge_base_ids))
            cached = self._indexes.get(key)
            if cached is not None:
                return cached
            rows = await ChunkRepository(session).for_search(key) if key else []
        chunks = [
            IndexedChunk(
                knowledge_base_id=kb,
                document=document,
                heading=heading,
                position=position,
                offset=offset,
                text=text,
            )
            for kb, document, heading, position, offset, text, _ in rows
        ]
        embeddings = [row[6] for row in rows]
        index = await asyncio.to_thread(ChunkIndex, chunks, embeddings)
        return self._indexes.put(key, index)

    async def search(
        self, *, knowledge_base_ids: Sequence[uuid.UUID], query: str, limit: int
    ) -> list[Hit]:
        index = await self.index_for(knowledge_base_ids)
        return await asyncio.to_thread(index.search, query, limit=limit)
