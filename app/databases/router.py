from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter

from app.databases.schemas import (
    DatabaseCreate,
    DatabaseRead,
    DatabaseUpdate,
    TableRead,
    TableUpdate,
)
from app.databases.service import database_service as service
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes

router = APIRouter(prefix="/databases", tags=["databases"])
add_crud_routes(
    router, service=service, create=DatabaseCreate, update=DatabaseUpdate, read=DatabaseRead
)


@router.patch("/{id}/tables/{table}", response_model=TableRead, responses=ERROR_RESPONSES)
async def update_table(id: uuid.UUID, table: str, body: TableUpdate, session: SessionDep) -> Any:
    """Hide a table from the model or describe it."""
    return await service.update_table(session, id, table, body)
