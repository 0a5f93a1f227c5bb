from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import selectinload
from sqlalchemy.orm.interfaces import ORMOption

from app.connectors.models import Connector, ConnectorAction
from app.kit.repository import RepositoryBase


class ConnectorRepository(RepositoryBase[Connector]):
    model = Connector

    def _options(self) -> Sequence[ORMOption]:
        return (selectinload(Connector.actions),)

    async def page_with_action_counts(
        self, *, limit: int, offset: int
    ) -> tuple[list[tuple[Connector, int]], int]:
        """A page of connectors without loading their actions, each with its action count."""
        total = await self.session.scalar(select(func.count()).select_from(Connector))
        counts = (
            select(ConnectorAction.connector_id, func.count().label("n"))
            .group_by(ConnectorAction.connector_id)
            .subquery()
        )
        stmt = (
            select(Connector, func.coalesce(counts.c.n, 0))
            .outerjoin(counts, counts.c.connector_id == Connector.id)
            .order_by(Connector.created_at, Connector.id)
            .limit(limit)
            .offset(offset)
        )
        rows = (await self.session.execute(stmt)).all()
        return [(connector, int(n)) for connector, n in rows], int(total or 0)


class ConnectorActionRepository(RepositoryBase[ConnectorAction]):
    model = ConnectorAction

    async def page_of(
        self, connector_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[ConnectorAction], int]:
        """A connector's actions by name."""
        where = ConnectorAction.connector_id == connector_id
        total = await self.session.scalar(
            select(func.count()).select_from(ConnectorAction).where(where)
        )
        stmt = (
            select(ConnectorAction)
            .where(where)
            .order_by(ConnectorAction.name)
            .limit(limit)
            .offset(offset)
        )
        return list((await self.session.execute(stmt)).scalars().all()), int(total or 0)

    async def count_of(self, connector_id: uuid.UUID) -> int:
        stmt = select(func.count()).select_from(ConnectorAction)
        total = await self.session.scalar(stmt.where(ConnectorAction.connector_id == connector_id))
        return int(total or 0)

    async def stamps(
        self, connector_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[tuple[uuid.UUID, datetime]]]:
        """Each connector's actions as `(id, updated_at)`, by name: what `ActionCatalog`
        compares its entries with (three narrow columns, no schema)."""
        stmt = (
            select(ConnectorAction.connector_id, ConnectorAction.id, ConnectorAction.updated_at)
            .where(ConnectorAction.connector_id.in_(list(connector_ids)))
            .order_by(ConnectorAction.connector_id, ConnectorAction.name)
        )
        out: dict[uuid.UUID, list[tuple[uuid.UUID, datetime]]] = {}
        for connector_id, ident, stamp in (await self.session.execute(stmt)).all():
            out.setdefault(connector_id, []).append((ident, stamp))
        return out

    async def of_connectors(
        self, connector_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[ConnectorAction]]:
        """These connectors' actions in one query, each connector's by name."""
        stmt = (
            select(ConnectorAction)
            .where(ConnectorAction.connector_id.in_(list(connector_ids)))
            .order_by(ConnectorAction.connector_id, ConnectorAction.name)
        )
        out: dict[uuid.UUID, list[ConnectorAction]] = {}
        for action in (await self.session.execute(stmt)).scalars():
            out.setdefault(action.connector_id, []).append(action)
        return out
