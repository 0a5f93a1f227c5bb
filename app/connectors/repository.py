from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import selectinload
from sqlalchemy.orm.interfaces import ORMOption

from app.connectors.models import Connector
from app.kit.repository import RepositoryBase


class ConnectorRepository(RepositoryBase[Connector]):
    model = Connector

    def _options(self) -> Sequence[ORMOption]:
        return (selectinload(Connector.actions),)
