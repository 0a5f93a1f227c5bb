from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from app.apikeys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyRead, ApiKeyUpdate
from app.apikeys.service import api_key_service as service
from app.db.session import SessionDep
from app.kit.pagination import PageDep
from app.kit.schemas import Page

router = APIRouter(prefix="/api-keys", tags=["api-keys"])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ApiKeyCreated)
async def create_api_key(body: ApiKeyCreate, session: SessionDep) -> ApiKeyCreated:
    """Create a key; the key itself is returned only in this response."""
    row, key = await service.create(session, body)
    return ApiKeyCreated.model_validate({**ApiKeyRead.model_validate(row).model_dump(), "key": key})


@router.get("", response_model=Page[ApiKeyRead])
async def list_api_keys(session: SessionDep, page: PageDep) -> Page[ApiKeyRead]:
    """List keys (hashes are never shown)."""
    items, total = await service.list(session, limit=page.limit, offset=page.offset)
    return Page(items=[ApiKeyRead.model_validate(i) for i in items], total=total, **vars(page))


@router.get("/{id}", response_model=ApiKeyRead)
async def get_api_key(id: uuid.UUID, session: SessionDep) -> ApiKeyRead:
    """Get one key."""
    return ApiKeyRead.model_validate(await service.get(session, id))


@router.patch("/{id}", response_model=ApiKeyRead)
async def update_api_key(id: uuid.UUID, body: ApiKeyUpdate, session: SessionDep) -> ApiKeyRead:
    """Rename a key or change its scopes."""
    return ApiKeyRead.model_validate(await service.update(session, id, body))


@router.delete("/{id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_api_key(id: uuid.UUID, session: SessionDep) -> None:
    """Revoke a key: it stops working at once and stays listed with `revoked_at`."""
    await service.revoke(session, id)
