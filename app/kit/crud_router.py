"""Declares the five CRUD routes of an admin resource from its schemas and service.

Deliberately without `from __future__ import annotations`: FastAPI reads the body types
from the annotations of the inner functions, which are the classes passed in.

See docs/contract.md §3.
"""

import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from fastapi import APIRouter, Request, status
from pydantic import BaseModel
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.convertors import StringConvertor, register_url_convertor

from app.db.session import SessionDep
from app.errors import error_body
from app.kit.pagination import PageDep
from app.kit.schemas import Page

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    404: {
        "description": "Unknown id",
        "content": {"application/json": {"example": error_body("NotFound", "...")}},
    },
    409: {
        "description": "Duplicate name",
        "content": {"application/json": {"example": error_body("Conflict", "...")}},
    },
    422: {
        "description": "Invalid field",
        "content": {"application/json": {"example": error_body("Invalid", "...")}},
    },
}


class ItemIdConvertor(StringConvertor):
    """`/{id:item}`: any path segment (validated as a UUID, 422 otherwise) except the name of
    a collection's own route (`/import`): `PATCH /connectors/import` is then a 405 naming the
    allowed methods, not an id that fails validation."""

    regex = r"(?!import$)[^/]+"


register_url_convertor("item", ItemIdConvertor())


AfterChange = Callable[[Request, uuid.UUID], Awaitable[None]]


class CrudServiceLike(Protocol):
    @property
    def label(self) -> str: ...

    async def create(self, session: AsyncSession, data: Any) -> Any: ...
    async def update(self, session: AsyncSession, id: uuid.UUID, data: Any) -> Any: ...
    async def get(self, session: AsyncSession, id: uuid.UUID) -> Any: ...
    async def list(
        self, session: AsyncSession, *, limit: int, offset: int
    ) -> tuple[list[Any], int]: ...
    async def delete(self, session: AsyncSession, id: uuid.UUID) -> Any: ...


def add_crud_routes(
    router: APIRouter,
    *,
    service: CrudServiceLike,
    create: type[BaseModel],
    update: type[BaseModel],
    read: type[BaseModel],
    after_change: AfterChange | None = None,
    list_read: type[BaseModel] | None = None,
    skip: frozenset[str] = frozenset(),
) -> None:
    """`after_change(request, id)` runs after an update or delete (close pools, sessions).
    `list_read` is the list's item schema when it is smaller than `read`. `skip` names the
    routes (`create`, `update`) a router declares itself."""
    label = service.label
    item = list_read or read

    async def create_item(body: create, session: SessionDep) -> Any:  # type: ignore[valid-type]
        return read.model_validate(await service.create(session, body))

    async def list_items(session: SessionDep, page: PageDep) -> Any:
        items, total = await service.list(session, limit=page.limit, offset=page.offset)
        return {"items": [item.model_validate(i) for i in items], "total": total, **vars(page)}

    async def get_item(id: uuid.UUID, session: SessionDep) -> Any:
        return read.model_validate(await service.get(session, id))

    async def update_item(
        id: uuid.UUID,
        body: update,  # type: ignore[valid-type]
        session: SessionDep,
        request: Request,
    ) -> Any:
        item = read.model_validate(await service.update(session, id, body))
        if after_change is not None:
            await after_change(request, id)
        return item

    async def delete_item(id: uuid.UUID, session: SessionDep, request: Request) -> None:
        await service.delete(session, id)
        if after_change is not None:
            await after_change(request, id)

    responses = ERROR_RESPONSES
    if "create" not in skip:
        router.add_api_route(
            "",
            create_item,
            methods=["POST"],
            status_code=status.HTTP_201_CREATED,
            response_model=read,
            responses=responses,
            summary=f"Create a {label}",
        )
    router.add_api_route(
        "",
        list_items,
        methods=["GET"],
        response_model=Page[item],  # type: ignore[valid-type]
        summary=f"List {label}s (paginated)",
    )
    router.add_api_route(
        "/{id:item}",
        get_item,
        methods=["GET"],
        response_model=read,
        responses=responses,
        summary=f"Get a {label}",
    )
    if "update" not in skip:
        router.add_api_route(
            "/{id:item}",
            update_item,
            methods=["PATCH"],
            response_model=read,
            responses=responses,
            summary=f"Update a {label} (partial)",
        )
    router.add_api_route(
        "/{id:item}",
        delete_item,
        methods=["DELETE"],
        status_code=status.HTTP_204_NO_CONTENT,
        responses=responses,
        summary=f"Delete a {label}",
    )
