from __future__ import annotations

import uuid
from collections.abc import Sequence

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
