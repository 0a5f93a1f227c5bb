from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response, status

from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.skills.schemas import SkillCreate, SkillRead, SkillSummary, SkillUpdate
from app.skills.service import skill_service as service
from app.skills.upload import REQUEST_BODY, read_import

router = APIRouter(prefix="/skills", tags=["skills"])


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=SkillRead,
    responses={**ERROR_RESPONSES, 200: {"description": "Replaced (replace: true)"}, 413: {}},
    openapi_extra={"requestBody": REQUEST_BODY},
    summary="Import a skill: SKILL.md, JSON {document, files} or a .zip of its folder",
)
async def import_skill(request: Request, response: Response, session: SessionDep) -> SkillRead:
    """Create a skill from its folder as published; `replace: true` updates the skill of that
    name (200) instead of answering 409. Scripts are stored and listed, never run."""
    body = await read_import(request)
    skill, created = await service.import_folder(
        session, body.folder, name=body.name, replace=body.replace
    )
    if not created:
        response.status_code = status.HTTP_200_OK
    return SkillRead.model_validate(skill)


@router.get(
    "/{id}/files/{path:path}",
    responses={**ERROR_RESPONSES},
    summary="One file of a skill's folder, as imported",
)
async def read_file(id: uuid.UUID, path: str, session: SessionDep) -> Response:
    found = await service.read_file(session, id, path)
    if found.text is not None:
        return Response(found.text, media_type=f"{found.media_type}; charset=utf-8")
    return Response(found.data or b"", media_type=found.media_type)


add_crud_routes(
    router,
    service=service,
    create=SkillCreate,
    update=SkillUpdate,
    read=SkillRead,
    list_read=SkillSummary,
)
