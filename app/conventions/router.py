from __future__ import annotations

from fastapi import APIRouter

from app.conventions.schemas import ConventionCreate, ConventionRead, ConventionUpdate
from app.conventions.service import convention_service
from app.kit.crud_router import add_crud_routes

router = APIRouter(prefix="/conventions", tags=["conventions"])
add_crud_routes(
    router,
    service=convention_service,
    create=ConventionCreate,
    update=ConventionUpdate,
    read=ConventionRead,
)
