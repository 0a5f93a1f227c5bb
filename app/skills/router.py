from __future__ import annotations

from fastapi import APIRouter, status

from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.skills.schemas import SkillCreate, SkillImport, SkillRead, SkillUpdate
from app.skills.service import skill_service as service

router = APIRouter(prefix="/skills", tags=["skills"])


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=SkillRead,
    responses=ERROR_RESPONSES,
)
async def import_skill(body: SkillImport, session: SessionDep) -> SkillRead:
    """Create a skill from a SKILL.md document (YAML front matter + body)."""
    skill = await service.import_document(session, body.document, name=body.name)
    return SkillRead.model_validate(skill)


add_crud_routes(router, service=service, create=SkillCreate, update=SkillUpdate, read=SkillRead)
