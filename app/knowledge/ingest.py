"""Adding documents: a file, a text or a page fetched by URL → converted and chunked in a
worker process (`prepare.py` in `app/convert/pool.py`) → embedded in batches in a thread →
chunks written in multi-row statements.

A document up to `QUIVER_KNOWLEDGE_ASYNC_BYTES` is ingested within the request (201, or 422
with the reason and nothing written). A larger one answers 202 at once: its row is stored
`pending`, the work goes on in a task of this object, and the row ends `ready` or `failed`
with the reason. Nothing of it runs on the event loop, so other requests never wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.convert.formats import TEXT_FORMATS, Format, detect_format
from app.convert.pool import ConversionPool
from app.errors import Conflict, Invalid, NotFound, PayloadTooLarge, QuiverError, Upstream
from app.knowledge.chunking import Chunk
from app.knowledge.index import chunk_fields_text
from app.knowledge.models import KnowledgeDocument
from app.knowledge.prepare import Prepared, prepare
from app.knowledge.repository import (
    FAILED,
    PENDING,
    READY,
    ChunkRepository,
    DocumentRepository,
    KnowledgeBaseRepository,
)
from app.retrieval.embedding import Embedder, to_bytes
from app.security.egress import EgressBlocked, EgressGuard, FetchError, display_url, guarded_request

log = logging.getLogger(__name__)

EMBED_BATCH = 256
INSERT_BATCH = 500
_NAME_CHARS = 256


@dataclass(frozen=True, kw_only=True)
class Upload:
    name: str
    raw: bytes
    format: Format
    replace: bool = False
    source_url: str | None = None


def _embed(texts: list[str]) -> list[bytes]:
    return [to_bytes(row) for row in Embedder.embed(texts)]


async def embed_chunks(name: str, chunks: Sequence[Chunk]) -> list[bytes]:
    """Embeddings in batches, each in a worker thread (the loop runs between batches)."""
    texts = [chunk_fields_text(name, c.heading_path, c.text) for c in chunks]
    vectors: list[bytes] = []
    for start in range(0, len(texts), EMBED_BATCH):
        vectors.extend(await asyncio.to_thread(_embed, texts[start : start + EMBED_BATCH]))
    return vectors


def _chunk_rows(
    document: KnowledgeDocument, chunks: Sequence[Chunk], vectors: Sequence[bytes]
) -> list[dict[str, Any]]:
    return [
        {
            "id": uuid.uuid4(),
            "document_id": document.id,
            "knowledge_base_id": document.knowledge_base_id,
            "position": position,
            "heading": chunk.heading_path,
            "offset": chunk.offset,
            "text": chunk.text,
            "embedding": vector,
        }
        for position, (chunk, vector) in enumerate(zip(chunks, vectors, strict=True))
    ]


class KnowledgeIngest:
    def __init__(
        self,
        *,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        converter: ConversionPool,
        http: httpx.AsyncClient,
    ) -> None:
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._converter = converter
        self._http = http
        self._guard = EgressGuard(settings)
        self._tasks: dict[uuid.UUID, asyncio.Task[None]] = {}

    # --- entry points -----------------------------------------------------------------------

    async def add(
        self, session: AsyncSession, base_id: uuid.UUID, upload: Upload
    ) -> tuple[KnowledgeDocument, bool]:
        """The stored document, and whether it is still being ingested (202)."""
        if len(upload.raw) > self._settings.max_import_bytes:
            raise PayloadTooLarge(
                f"file: {len(upload.raw)} bytes; at most {self._settings.max_import_bytes} "
                "are accepted (QUIVER_MAX_IMPORT_BYTES)"
            )
        if len(upload.raw) > self._settings.knowledge_async_bytes:
            return await self._start(base_id, upload), True
        existing = await self._claim(session, base_id, upload)
        prepared = await self._prepare(upload)
        vectors = await embed_chunks(upload.name, prepared.chunks)
        document = existing or KnowledgeDocument(knowledge_base_id=base_id, name=upload.name)
        self._fill(document, upload, prepared)
        try:
            async with session.begin_nested():
                session.add(document)
                await session.flush()
        except IntegrityError as exc:
            raise Conflict(f"document {upload.name!r} conflicts with an existing one") from exc
        await self._write_chunks(session, document, prepared.chunks, vectors, commit=False)
        return document, False

    async def add_url(
        self,
        session: AsyncSession,
        base_id: uuid.UUID,
        url: str,
        *,
        name: str | None,
        fmt: Format | None,
        replace: bool,
    ) -> tuple[KnowledgeDocument, bool]:
        """The page or file at `url`, stored like an upload with the URL as its source."""
        if await KnowledgeBaseRepository(session).get(base_id) is None:  # before any fetch
            raise NotFound(f"knowledge base {str(base_id)!r} not found")
        raw, found = await self.fetch(url, fmt)
        upload = Upload(
            name=name or self.url_name(url), raw=raw, format=found, replace=replace, source_url=url
        )
        return await self.add(session, base_id, upload)

    async def refresh(
        self, session: AsyncSession, document: KnowledgeDocument
    ) -> tuple[KnowledgeDocument, bool]:
        """Fetch a URL document again; its content is replaced, its id kept."""
        if not document.source_url:
            raise Invalid("document: it was not fetched from a URL; upload it again instead")
        return await self.add_url(
            session,
            document.knowledge_base_id,
            document.source_url,
            name=document.name,
            fmt=None,
            replace=True,
        )

    async def fetch(self, url: str, declared: Format | None) -> tuple[bytes, Format]:
        """The page or file at `url` through the egress guard (size cap, every redirect
        checked); text formats re-encoded as UTF-8 from the page's charset."""
        settings = self._settings
        try:
            response = await guarded_request(
                self._http,
                self._guard,
                "GET",
                url,
                timeout=settings.http_timeout_s,
                max_bytes=settings.max_import_bytes,
            )
        except EgressBlocked as exc:
            raise Invalid(f"url: {exc}") from exc
        except FetchError as exc:
            raise Upstream(f"url: {exc}") from exc
        if response.truncated:
            raise PayloadTooLarge(
                f"url: the page is larger than {settings.max_import_bytes} bytes "
                "(QUIVER_MAX_IMPORT_BYTES)"
            )
        if response.status_code >= 400:
            raise Upstream(f"url: HTTP {response.status_code} from {response.final_url}")
        path = httpx.URL(response.final_url).path
        fmt = declared or detect_format(path, response.headers.get("content-type"))
        raw = response.text().encode("utf-8") if fmt in TEXT_FORMATS else response.body
        return raw, fmt

    def url_name(self, url: str) -> str:
        try:
            shown = display_url(httpx.URL(url))
        except httpx.InvalidURL as exc:
            raise Invalid(f"url: not a valid URL ({exc})") from exc
        return shown[:_NAME_CHARS]

    # --- the steps --------------------------------------------------------------------------

    async def _claim(
        self, session: AsyncSession, base_id: uuid.UUID, upload: Upload
    ) -> KnowledgeDocument | None:
        """404 for an unknown base; the document `replace` takes over, or 409 on the name."""
        if await KnowledgeBaseRepository(session).get(base_id) is None:
            raise NotFound(f"knowledge base {str(base_id)!r} not found")
        existing = await DocumentRepository(session).get_by(
            knowledge_base_id=base_id, name=upload.name
        )
        if existing is not None and not upload.replace:
            raise Conflict(
                f"a document named {upload.name!r} already exists in this knowledge base "
                "(send replace: true to replace it)"
            )
        return existing

    async def _prepare(self, upload: Upload) -> Prepared:
        return await self._converter.run(
            prepare, upload.raw, upload.format, what=f"document {upload.name!r}"
        )

    @staticmethod
    def _fill(document: KnowledgeDocument, upload: Upload, prepared: Prepared | None) -> None:
        document.format = upload.format
        document.source_url = upload.source_url
        document.size_bytes = len(upload.raw)
        document.error = None
        document.text = prepared.text if prepared else ""
        document.chars = len(prepared.text) if prepared else 0
        document.chunk_count = len(prepared.chunks) if prepared else 0
        document.status = READY if prepared else PENDING

    async def _write_chunks(
        self,
        session: AsyncSession,
        document: KnowledgeDocument,
        chunks: Sequence[Chunk],
        vectors: Sequence[bytes],
        *,
        commit: bool,
    ) -> None:
        repository = ChunkRepository(session)
        await repository.delete_of_document(document.id)
        rows = _chunk_rows(document, chunks, vectors)
        for start in range(0, len(rows), INSERT_BATCH):
            await repository.insert_many(rows[start : start + INSERT_BATCH])
            if commit:  # background: short write transactions (SQLite writers wait on them)
                await session.commit()

    async def _start(self, base_id: uuid.UUID, upload: Upload) -> KnowledgeDocument:
        """Store the row `pending` (committed, so `GET` shows it at once) and start the work."""
        async with self._sessionmaker() as session:
            existing = await self._claim(session, base_id, upload)
            if existing is not None and existing.id in self._tasks:
                raise Conflict(f"document {upload.name!r} is still being ingested; try later")
            document = existing or KnowledgeDocument(knowledge_base_id=base_id, name=upload.name)
            self._fill(document, upload, None)
            session.add(document)
            try:
                await session.commit()
            except IntegrityError as exc:
                raise Conflict(f"document {upload.name!r} conflicts with an existing one") from exc
        task = asyncio.create_task(self._ingest(document, upload))
        self._tasks[document.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(document.id, None))
        return document

    async def _ingest(self, document: KnowledgeDocument, upload: Upload) -> None:
        try:
            prepared = await self._prepare(upload)
            vectors = await embed_chunks(upload.name, prepared.chunks)
            async with self._sessionmaker() as session:
                await self._write_chunks(session, document, prepared.chunks, vectors, commit=True)
                found = await DocumentRepository(session).finish(
                    document.id,
                    status=READY,
                    text=prepared.text,
                    chars=len(prepared.text),
                    chunk_count=len(prepared.chunks),
                )
                if not found:  # deleted while it was ingested
                    await ChunkRepository(session).delete_of_document(document.id)
                await session.commit()
        except asyncio.CancelledError:
            await self._fail(document.id, "interrupted: the server stopped; add it again")
            raise
        except QuiverError as exc:
            await self._fail(document.id, exc.message)
        except IntegrityError:  # the document was deleted while it was ingested
            log.info("knowledge document %s deleted during ingestion", document.id)
        except Exception as exc:
            log.exception("knowledge document %s failed", document.id)
            await self._fail(document.id, f"internal error ({type(exc).__name__})")

    async def _fail(self, document_id: uuid.UUID, reason: str) -> None:
        try:
            async with self._sessionmaker() as session:
                await ChunkRepository(session).delete_of_document(document_id)
                await DocumentRepository(session).finish(
                    document_id, status=FAILED, error=reason, chunk_count=0
                )
                await session.commit()
        except Exception:
            log.exception("could not record the failure of knowledge document %s", document_id)

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
