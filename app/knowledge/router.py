from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Request, status

from app.db.session import SessionDep
from app.errors import error_body
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.pagination import PageDep
from app.knowledge.schemas import (
    ChunkRead,
    DocumentDetail,
    DocumentPage,
    DocumentRead,
    KnowledgeBaseCreate,
    KnowledgeBaseRead,
    KnowledgeBaseUpdate,
)
from app.knowledge.service import knowledge_base_service as service
from app.knowledge.upload import REQUEST_BODY, read_document

router = APIRouter(prefix="/knowledge-bases", tags=["knowledge-bases"])

_UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERROR_RESPONSES,
    409: {
        "description": "A document of that name is already in the knowledge base",
        "content": {"application/json": {"example": error_body("Conflict", "...")}},
    },
    413: {
        "description": "The document is too large",
        "content": {"application/json": {"example": error_body("PayloadTooLarge", "...")}},
    },
}
_DOCUMENT_RESPONSES: dict[int | str, dict[str, Any]] = {
    k: v for k, v in ERROR_RESPONSES.items() if k in (404, 422)
}


@router.post(
    "/{id}/documents",
    status_code=status.HTTP_201_CREATED,
    response_model=DocumentRead,
    responses=_UPLOAD_RESPONSES,
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Add a document (JSON body or file upload)",
)
async def add_document(id: uuid.UUID, request: Request, session: SessionDep) -> DocumentRead:
    """Text, Markdown or HTML, as `{name, text, format}` or a multipart `file`."""
    document = await service.add_document(session, id, await read_document(request))
    return DocumentRead.model_validate(document)


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
