from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response, status

from app.db.session import SessionDep
from app.errors import error_body
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.pagination import PageDep
from app.kit.state import SettingsDep, runtime_part
from app.knowledge.backend import KnowledgeSearch
from app.knowledge.ingest import KnowledgeIngest
from app.knowledge.schemas import (
    ChunkRead,
    DocumentDetail,
    DocumentImport,
    DocumentPage,
    DocumentRead,
    KnowledgeBaseCreate,
    KnowledgeBaseRead,
    KnowledgeBaseUpdate,
    SearchResults,
)
from app.knowledge.service import knowledge_base_service as service
from app.knowledge.upload import REQUEST_BODY, read_document

IngestDep = Annotated[KnowledgeIngest, Depends(runtime_part("ingest"))]
SearchDep = Annotated[KnowledgeSearch, Depends(runtime_part("knowledge"))]
MAX_SEARCH_LIMIT = 20

router = APIRouter(prefix="/knowledge-bases", tags=["knowledge-bases"])

_UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    202: {
        "description": "A large document: stored `pending` and ingested in the background; "
        "`GET …/documents/{document_id}` shows its `status`",
        "model": DocumentRead,
    },
    409: {
        "description": "A document of that name is already in the knowledge base",
        "content": {"application/json": {"example": error_body("Conflict", "...")}},
    },
    413: {
        "description": "The document is too large",
        "content": {"application/json": {"example": error_body("PayloadTooLarge", "...")}},
    },
    502: {
        "description": "The URL could not be fetched",
        "content": {"application/json": {"example": error_body("Upstream", "...")}},
    },
}
_DOCUMENT_RESPONSES: dict[int | str, dict[str, Any]] = {
    k: v for k, v in ERROR_RESPONSES.items() if k in (404, 422)
}


def _answer(response: Response, document: Any, pending: bool) -> DocumentRead:
    if pending:
        response.status_code = status.HTTP_202_ACCEPTED
    return DocumentRead.model_validate(document)


@router.post(
    "/{id}/documents",
    status_code=status.HTTP_201_CREATED,
    response_model=DocumentRead,
    responses=_UPLOAD_RESPONSES,
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Add a document (file upload, JSON text, or a URL to fetch)",
)
async def add_document(
    id: uuid.UUID,
    request: Request,
    response: Response,
    session: SessionDep,
    ingest: IngestDep,
    settings: SettingsDep,
) -> DocumentRead:
    """PDF, DOCX, XLSX, PPTX, EPUB, HTML, Markdown, text, CSV or JSON, as a multipart `file`,
    as `{name, text, format}`, or as `{url, name?}`; `replace: true` replaces the document of
    that name, keeping its id. Above `QUIVER_KNOWLEDGE_ASYNC_BYTES` the answer is 202."""
    body = await read_document(request, max_bytes=settings.max_import_bytes)
    if isinstance(body, DocumentImport):
        document, pending = await ingest.add_url(
            session, id, body.url, name=body.name, fmt=body.format, replace=body.replace
        )
    else:
        document, pending = await ingest.add(session, id, body)
    return _answer(response, document, pending)


@router.post(
    "/{id}/documents/{document_id}/refresh",
    response_model=DocumentRead,
    responses={**_UPLOAD_RESPONSES, 202: _UPLOAD_RESPONSES[202]},
    summary="Fetch a URL document again and replace its content (it keeps its id)",
)
async def refresh_document(
    id: uuid.UUID,
    document_id: uuid.UUID,
    response: Response,
    session: SessionDep,
    ingest: IngestDep,
) -> DocumentRead:
    document = await service.get_document(session, id, document_id)
    document, pending = await ingest.refresh(session, document)
    return _answer(response, document, pending)


@router.get(
    "/{id}/search",
    response_model=SearchResults,
    responses=_DOCUMENT_RESPONSES,
    summary="Search a knowledge base as the `knowledge` tool does",
)
async def search(
    id: uuid.UUID,
    session: SessionDep,
    knowledge: SearchDep,
    query: Annotated[str, Query(min_length=1, max_length=2000)],
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_LIMIT)] = 5,
) -> SearchResults:
    """The ranked chunks with their source, heading path and score (no `min_score` cut)."""
    return await service.search(session, knowledge, id, query=query, limit=limit)


@router.get(
    "/{id}/documents",
    response_model=DocumentPage,
    responses=_DOCUMENT_RESPONSES,
    summary="List a knowledge base's documents (paginated)",
)
async def list_documents(id: uuid.UUID, session: SessionDep, page: PageDep) -> DocumentPage:
    items, total = await service.list_documents(session, id, limit=page.limit, offset=page.offset)
    return DocumentPage(
        items=[DocumentRead.model_validate(d) for d in items], total=total, **vars(page)
    )


@router.get(
    "/{id}/documents/{document_id}",
    response_model=DocumentDetail,
    responses=_DOCUMENT_RESPONSES,
    summary="Get a document with its text and chunks",
)
async def get_document(
    id: uuid.UUID, document_id: uuid.UUID, session: SessionDep
) -> DocumentDetail:
    document = await service.get_document(session, id, document_id)
    chunks = await service.chunks(session, document.id)
    return DocumentDetail.model_validate(
        {
            **DocumentRead.model_validate(document).model_dump(),
            "text": document.text,
            "chunks": [ChunkRead.model_validate(c) for c in chunks],
        }
    )


@router.delete(
    "/{id}/documents/{document_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=_DOCUMENT_RESPONSES,
    summary="Delete a document and its chunks",
)
async def delete_document(id: uuid.UUID, document_id: uuid.UUID, session: SessionDep) -> None:
    await service.delete_document(session, id, document_id)


add_crud_routes(
    router,
    service=service,
    create=KnowledgeBaseCreate,
    update=KnowledgeBaseUpdate,
    read=KnowledgeBaseRead,
)
