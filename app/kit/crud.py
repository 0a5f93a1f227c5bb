"""Shared CRUD behaviour for the admin resources: one place for 404/409 and partial updates."""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Collection
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.base import Base
from app.errors import Conflict, Invalid, NotFound
from app.kit.repository import Named, RepositoryBase

M = TypeVar("M", bound=Base)


class CrudService(Generic[M]):
    """Stateless; every method takes the request's session first. Never commits."""

    repository: ClassVar[type[RepositoryBase[Any]]]
    label: ClassVar[str]
    """Human name in messages, e.g. "agent"."""
    unique_name: ClassVar[bool] = True

    def repo(self, session: AsyncSession) -> RepositoryBase[M]:
        return self.repository(session)

    async def get(self, session: AsyncSession, id: uuid.UUID) -> M:
        obj = await self.repo(session).get(id)
        if obj is None:
            raise NotFound(f"{self.label} {str(id)!r} not found")
        return obj

    async def list(self, session: AsyncSession, *, limit: int, offset: int) -> tuple[list[M], int]:
        return await self.repo(session).paginate(limit=limit, offset=offset)

    async def find_named(
        self,
        session: AsyncSession,
        containing: str,
        *,
        limit: int,
        exclude: Collection[uuid.UUID] = (),
        only: Collection[uuid.UUID] | None = None,
    ) -> tuple[builtins.list[Named], bool]:
        """Up to `limit` (id, name) rows whose name contains the text (the newest when it is
        empty), and whether there are more: a picker searches rather than listing them all."""
        rows = await self.repo(session).names_like(
            containing, limit=limit + 1, exclude=exclude, only=only
        )
        return rows[:limit], len(rows) > limit

    async def named_ids(
        self, session: AsyncSession, ids: Collection[uuid.UUID]
    ) -> builtins.list[Named]:
        return await self.repo(session).names_of(ids)

    async def ensure_name_free(
        self, session: AsyncSession, name: str, *, current: uuid.UUID | None = None
    ) -> None:
        if not self.unique_name:
            return
        existing = await self.repo(session).get_by(name=name)
        if existing is not None and existing.id != current:  # type: ignore[attr-defined]
            raise Conflict(f"a {self.label} named {name!r} already exists")

    async def save(self, session: AsyncSession, obj: M) -> M:
        """Flush, turning a unique-constraint race into a 409 instead of a 500."""
        try:
            async with session.begin_nested():
                session.add(obj)
                await session.flush()
        except IntegrityError as exc:
            raise Conflict(f"{self.label} conflicts with an existing one: {exc.orig}") from exc
        return obj

    def apply(
        self, obj: Base, update: BaseModel, *, skip: frozenset[str] = frozenset()
    ) -> set[str]:
        """Apply the fields the client sent (PATCH semantics); returns their names."""
        fields = update.model_dump(exclude_unset=True)
        columns = sa_inspect(type(obj)).columns
        for key, value in fields.items():
            if value is None and key in columns and not columns[key].nullable:
                raise Invalid(f"{key}: may not be null")
        for key, value in fields.items():
            if key not in skip:
                setattr(obj, key, value)
        return set(fields)

    async def delete(self, session: AsyncSession, id: uuid.UUID) -> M:
        obj = await self.get(session, id)
        await self.deleted(session, obj)
        await self.repo(session).delete(obj)
        return obj

    async def deleted(self, session: AsyncSession, obj: M) -> None:
        """Called in `delete`'s transaction before the row goes (a resource whose history
        outlives it leaves its tombstone: `audit/tombstones.py:RemembersDeleted`)."""
