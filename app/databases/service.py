from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.attributes import flag_modified

from app.audit.tombstones import RemembersDeleted
from app.databases.backend import DatabaseBackend
from app.databases.engines import EngineCache
from app.databases.introspect import introspect, merge_schema
from app.databases.models import DatabaseConnector
from app.databases.repository import DatabaseRepository
from app.databases.schemas import DatabaseCreate, DatabaseUpdate, TableUpdate
from app.db.base import utcnow
from app.errors import Invalid, NotFound
from app.kit.crud import CrudService
from app.kit.schemas import ToolCallResult
from app.security.db_url import parse_database_url
from app.tools.base import CallContext
from app.tools.timing import timed_tool_call


def _dialect(url: str) -> str:
    """The URL's dialect; a URL the engines could not parse is a 422 that does not echo it."""
    from app.databases.readonly import dialect_from_url

    try:
        dialect = dialect_from_url(url)
        parse_database_url(url)
    except ValueError as exc:
        raise Invalid(f"url: {exc}") from None
    return dialect


class DatabaseService(RemembersDeleted, CrudService[DatabaseConnector]):
    history_kind = "database"
    repository = DatabaseRepository
    label = "database"

    async def create(self, session: AsyncSession, data: DatabaseCreate) -> DatabaseConnector:
        await self.ensure_name_free(session, data.name)
        row = DatabaseConnector(**data.model_dump(), dialect=_dialect(data.url))
        return await self.save(session, row)

    async def update(
        self, session: AsyncSession, id: uuid.UUID, data: DatabaseUpdate
    ) -> DatabaseConnector:
        row = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        if data.url is not None:
            row.dialect = _dialect(data.url)
        self.apply(row, data)
        return await self.save(session, row)

    async def introspect(
        self, session: AsyncSession, id: uuid.UUID, engines: EngineCache
    ) -> DatabaseConnector:
        """Refresh the cached schema from the live database, keeping admins' flags."""
        row = await self.get(session, id)
        fresh = await introspect(row, engines)
        row.schema_cache = merge_schema(row.schema_cache or [], fresh)
        row.introspected_at = utcnow()
        return await self.save(session, row)

    async def test_query(
        self, session: AsyncSession, id: uuid.UUID, sql: str, executor: DatabaseBackend
    ) -> ToolCallResult:
        """Run SQL exactly as the model's `database query` would (same validation, same limits)."""
        row = await self.get(session, id)
        return await timed_tool_call(executor.query(row, sql, CallContext()))

    async def update_table(
        self, session: AsyncSession, id: uuid.UUID, table: str, data: TableUpdate
    ) -> dict[str, Any]:
        row = await self.get(session, id)
        for entry in row.schema_cache:
            if entry.get("name") == table:
                entry.update(data.model_dump(exclude_unset=True))
                flag_modified(row, "schema_cache")
                await self.save(session, row)
                return dict(entry)
        known = ", ".join(t.get("name", "") for t in row.schema_cache) or "none (introspect first)"
        raise NotFound(f"table {table!r} not found in database {row.name!r}; known: {known}")


database_service = DatabaseService()
