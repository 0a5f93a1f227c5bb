from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from app.databases.engines import EngineCache
from app.databases.query import DatabaseExecutor
from app.databases.schemas import (
    DatabaseCreate,
    DatabaseRead,
    DatabaseUpdate,
    QueryRequest,
    TableRead,
    TableUpdate,
)
from app.databases.service import database_service as service
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.schemas import ToolCallResult
from app.kit.state import runtime_part

router = APIRouter(prefix="/databases", tags=["databases"])
_engines = runtime_part("engines")
EngineCacheDep = Annotated[EngineCache, Depends(_engines)]
DatabaseExecutorDep = Annotated[DatabaseExecutor, Depends(runtime_part("databases"))]


async def _dispose_engine(request: Request, id: uuid.UUID) -> None:
    engines: EngineCache = await _engines(request)
    await engines.dispose(id)


add_crud_routes(
    router,
    service=service,
    create=DatabaseCreate,
    update=DatabaseUpdate,
    read=DatabaseRead,
    after_change=_dispose_engine,
)


@router.post(
    "/{id}/introspect",
    response_model=DatabaseRead,
    responses={**ERROR_RESPONSES, 502: {}},  # the database refused or failed the reads
)
async def introspect_database(id: uuid.UUID, session: SessionDep, engines: EngineCacheDep) -> Any:
    """Read tables, columns, keys and comments into the cached schema the model sees."""
    return DatabaseRead.model_validate(await service.introspect(session, id, engines))


@router.post("/{id}/query", response_model=ToolCallResult, responses=ERROR_RESPONSES)
async def query_database(
    id: uuid.UUID, body: QueryRequest, session: SessionDep, executor: DatabaseExecutorDep
) -> Any:
    """Run read-only SQL with the model's guards; answer the text the model would see."""
    return await service.test_query(session, id, body.sql, executor)


@router.patch("/{id}/tables/{table}", response_model=TableRead, responses=ERROR_RESPONSES)
async def update_table(id: uuid.UUID, table: str, body: TableUpdate, session: SessionDep) -> Any:
    """Hide a table from the model or describe it."""
    return await service.update_table(session, id, table, body)
