"""The knowledge pages: knowledge bases, their documents, upload and search."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db.session import SessionDep
from app.errors import Invalid
from app.kit.state import SettingsDep, runtime_part
from app.knowledge.backend import KnowledgeSearch
from app.knowledge.ingest import KnowledgeIngest
from app.knowledge.schemas import DocumentRead, KnowledgeBaseCreate, KnowledgeBaseRead
from app.knowledge.service import knowledge_base_service as service
from app.knowledge.upload import from_upload
from app.ui.deps import LIST_ALL, PAGE, AdminDep, AdminFormDep, Offset, done
from app.ui.render import page

router = APIRouter(prefix="/ui", include_in_schema=False)
KNOWLEDGE = "/ui/knowledge"
IngestDep = Annotated[KnowledgeIngest, Depends(runtime_part("ingest"))]
SearchDep = Annotated[KnowledgeSearch, Depends(runtime_part("knowledge"))]
SEARCH_LIMIT = 8


@router.get("/knowledge", response_class=HTMLResponse)
async def knowledge_bases(request: Request, session: SessionDep, console: AdminDep) -> Response:
    rows, total = await service.list(session, limit=LIST_ALL, offset=0)
    bases = [KnowledgeBaseRead.model_validate(row) for row in rows]
    return page(request, "knowledge.html", console, bases=bases, total=total)


@router.post("/knowledge")
async def create_knowledge_base(
    form: AdminFormDep,
    name: Annotated[str, Form(max_length=200)],
    description: Annotated[str, Form(max_length=2000)] = "",
) -> Response:
    async def write() -> RedirectResponse:
        body = KnowledgeBaseCreate.model_validate({"name": name, "description": description})
        base = await service.create(form.session, body)
        return done(form.console, f"{KNOWLEDGE}/{base.id}", f"knowledge base {base.name} created")

    return await form.submit(KNOWLEDGE, write)


@router.get("/knowledge/{base_id}", response_class=HTMLResponse)
async def knowledge_base(
    request: Request,
    base_id: uuid.UUID,
    session: SessionDep,
    knowledge: SearchDep,
    console: AdminDep,
    query: Annotated[str, Query(max_length=2000)] = "",
    offset: Offset = 0,
) -> Response:
    base = KnowledgeBaseRead.model_validate(await service.get(session, base_id))
    documents, total = await service.list_documents(session, base_id, limit=PAGE, offset=offset)
    results = None
    if query.strip():
        results = await service.search(session, knowledge, base_id, query=query, limit=SEARCH_LIMIT)
    return page(
        request,
        "knowledge_base.html",
        console,
        base=base,
        documents=[DocumentRead.model_validate(d) for d in documents],
        total=total,
        offset=offset,
        size=PAGE,
        query=query,
        results=results,
    )


@router.post("/knowledge/{base_id}/documents")
async def upload_document(
    base_id: uuid.UUID,
    form: AdminFormDep,
    ingest: IngestDep,
    settings: SettingsDep,
    file: Annotated[UploadFile | None, File()] = None,
    name: Annotated[str, Form(max_length=256)] = "",
    replace: Annotated[bool, Form()] = False,
) -> Response:
    """A file through the knowledge API's own reading and ingestion; refusals (413, 422, 409)
    come back as a message on the page."""
    path = f"{KNOWLEDGE}/{base_id}"

    async def write() -> RedirectResponse:
        if file is None or not file.filename:
            raise Invalid("file: choose a file to upload")
        upload = await from_upload(
            file,
            name=name.strip() or None,
            declared=None,
            replace=replace,
            max_bytes=settings.max_import_bytes,
        )
        document, pending = await ingest.add(form.session, base_id, upload)
        state = "stored, being ingested" if pending else document.status
        return done(form.console, path, f"document {document.name}: {state}")

    return await form.submit(path, write)


@router.post("/knowledge/{base_id}/documents/{document_id}/delete")
async def delete_document(
    base_id: uuid.UUID, document_id: uuid.UUID, form: AdminFormDep
) -> Response:
    path = f"{KNOWLEDGE}/{base_id}"

    async def write() -> RedirectResponse:
        document = await service.get_document(form.session, base_id, document_id)
        name = document.name
        await service.delete_document(form.session, base_id, document_id)
        return done(form.console, path, f"document {name} deleted")

    return await form.submit(path, write)
