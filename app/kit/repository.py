"""Repositories keep SQL out of services and routers (Polar's RepositoryBase)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from sqlalchemy import Select, func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.interfaces import ORMOption

from app.db.base import Base

M = TypeVar("M", bound=Base)


class Named(NamedTuple):
    """A row's id and name only: what a picker shows (no eager loads, no other columns)."""

    id: uuid.UUID
    name: str


class RepositoryBase(Generic[M]):
    model: type[M]

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    def _options(self) -> Sequence[ORMOption]:
        """Eager loads every read applies (relationships are lazy="raise")."""
        return ()

    def base_select(self) -> Select[M]:
        return select(self.model).options(*self._options())

    async def get(self, id: uuid.UUID) -> M | None:
        stmt = self.base_select().where(self.model.id == id)  # type: ignore[attr-defined]
        return (await self.session.execute(stmt)).scalars().unique().one_or_none()

    async def get_by(self, **filters: Any) -> M | None:
        stmt = self.base_select().filter_by(**filters)
        return (await self.session.execute(stmt)).scalars().unique().one_or_none()

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[M]:
        if not ids:
            return []
        stmt = self.base_select().where(self.model.id.in_(ids))  # type: ignore[attr-defined]
        return list((await self.session.execute(stmt)).scalars().unique().all())

    async def paginate(
        self, *, limit: int, offset: int, stmt: Select[M] | None = None
    ) -> tuple[list[M], int]:
        stmt = stmt if stmt is not None else self.base_select()
        total = await self.session.scalar(select(func.count()).select_from(stmt.subquery()))
        order = getattr(self.model, "created_at", None)
        if order is not None:
            stmt = stmt.order_by(order, self.model.id)  # type: ignore[attr-defined]
        rows = await self.session.execute(stmt.limit(limit).offset(offset))
        return list(rows.scalars().unique().all()), int(total or 0)

    async def names_like(
        self,
        containing: str,
        *,
        limit: int,
        exclude: Collection[uuid.UUID] = (),
        only: Collection[uuid.UUID] | None = None,
    ) -> list[Named]:
        """Up to `limit` rows whose name contains `containing` (any case; `%` and `_` match
        themselves), by name; with no text, the newest rows first (the one just created is
        the likeliest to be picked). Rows in `exclude` are left out; with `only`, only those
        (what a key restricted to some agents may use)."""
        model: Any = self.model
        stmt = select(model.id, model.name)
        if containing:
            stmt = stmt.where(model.name.icontains(containing, autoescape=True))
            stmt = stmt.order_by(model.name, model.id)
        else:
            stmt = stmt.order_by(model.created_at.desc(), model.id)
        if exclude:
            stmt = stmt.where(model.id.not_in(list(exclude)))
        if only is not None:
            stmt = stmt.where(model.id.in_(list(only)))
        rows = await self.session.execute(stmt.limit(limit))
        return [Named(row[0], row[1]) for row in rows.all()]

    async def names_of(self, ids: Collection[uuid.UUID]) -> list[Named]:
        """The rows of `ids` that exist, by name."""
        if not ids:
            return []
        model: Any = self.model
        stmt = select(model.id, model.name).where(model.id.in_(list(ids)))
        rows = await self.session.execute(stmt.order_by(model.name, model.id))
        return [Named(row[0], row[1]) for row in rows.all()]

    async def add(self, obj: M) -> M:
        self.session.add(obj)
        await self.session.flush()
        return obj

    async def delete(self, obj: M) -> None:
        await self.session.delete(obj)
        await self.session.flush()
