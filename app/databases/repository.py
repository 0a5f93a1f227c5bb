from __future__ import annotations

from app.databases.models import DatabaseConnector
from app.kit.repository import RepositoryBase


class DatabaseRepository(RepositoryBase[DatabaseConnector]):
    model = DatabaseConnector
