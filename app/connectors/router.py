from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response, status

from app.connectors import schemas
from app.connectors.execute import ConnectorExecutor
from app.connectors.service import connector_service as service
from app.db.session import SessionDep
from app.kit.crud_router import ERROR_RESPONSES, add_crud_routes
from app.kit.pagination import PageDep
from app.kit.schemas import Page, ToolCallResult
from app.kit.state import runtime_part

router = APIRouter(prefix="/connectors", tags=["connectors"])
ConnectorExecutorDep = Annotated[ConnectorExecutor, Depends(runtime_part("connectors"))]


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.ConnectorImported,
    responses=ERROR_RESPONSES,
)
async def import_connector(body: schemas.ConnectorImport, session: SessionDep) -> Any:
    """Create a connector from an OpenAPI 3.0/3.1 document (JSON object, or JSON/YAML text)."""
    return as_json(await service.import_openapi(session, body), status.HTTP_201_CREATED)


add_crud_routes(
    router,
    service=service,
    create=schemas.ConnectorCreate,
    update=schemas.ConnectorUpdate,
    read=schemas.ConnectorRead,
    list_read=schemas.ConnectorSummary,
)


@router.post("/{id}/import", response_model=schemas.ConnectorImported, responses=ERROR_RESPONSES)
async def reimport_connector(
    id: uuid.UUID, body: schemas.ConnectorImport, session: SessionDep
) -> Any:
    """Re-import a newer OpenAPI document: actions are added, updated in place or removed
    (reported in `changes`); credentials are kept unless new ones are sent."""
    return as_json(await service.resync_openapi(session, id, body), status.HTTP_200_OK)


def as_json(result: schemas.ConnectorImported, status_code: int) -> Response:
    """Serialised here (pydantic-core, in one pass): a 10k-action answer would otherwise be
    validated again and encoded in Python on the event loop."""
    return Response(
        result.model_dump_json(), status_code=status_code, media_type="application/json"
    )


@router.get("/{id}/actions", response_model=Page[schemas.ActionRead], responses=ERROR_RESPONSES)
async def list_actions(id: uuid.UUID, session: SessionDep, page: PageDep) -> Any:
    """List a connector's actions by name (paginated: `limit` ≤ 200, `offset`, `total`)."""
    items, total = await service.list_actions(session, id, limit=page.limit, offset=page.offset)
    return Page(
        items=[schemas.ActionRead.model_validate(a) for a in items], total=total, **vars(page)
    )


@router.post(
    "/{id}/actions",
    status_code=status.HTTP_201_CREATED,
    response_model=schemas.ActionRead,
    responses=ERROR_RESPONSES,
)
async def add_action(id: uuid.UUID, body: schemas.ActionCreate, session: SessionDep) -> Any:
    """Add an action to a connector."""
    return await service.add_action(session, id, body)


@router.get("/{id}/actions/{name}", response_model=schemas.ActionRead, responses=ERROR_RESPONSES)
async def get_action(id: uuid.UUID, name: str, session: SessionDep) -> Any:
    """Get one action."""
    return service.find_action(await service.get(session, id), name)


@router.patch("/{id}/actions/{name}", response_model=schemas.ActionRead, responses=ERROR_RESPONSES)
async def update_action(
    id: uuid.UUID, name: str, body: schemas.ActionUpdate, session: SessionDep
) -> Any:
    """Update an action (partial)."""
    return await service.update_action(session, id, name, body)


@router.delete(
    "/{id}/actions/{name}", status_code=status.HTTP_204_NO_CONTENT, responses=ERROR_RESPONSES
)
async def delete_action(id: uuid.UUID, name: str, session: SessionDep) -> None:
    """Delete an action."""
    await service.delete_action(session, id, name)


@router.post("/{id}/actions/{name}/test", response_model=ToolCallResult, responses=ERROR_RESPONSES)
async def test_action(
    id: uuid.UUID,
    name: str,
    body: schemas.ActionTestRequest,
    session: SessionDep,
    executor: ConnectorExecutorDep,
) -> Any:
    """Run one action with the same guards and executor as the model; answer what it would see."""
    return await service.test_action(session, id, name, body, executor)
