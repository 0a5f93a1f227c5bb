"""History outlives what it names: a deleted agent, connector, database or MCP server leaves
a row in `deleted_resources` (its id, kind and name), so runs, conversations and tool calls
that name it still read as `{name, deleted: true}`. Only `DELETE /conversations/{id}` and the
retention setting (`QUIVER_HISTORY_RETENTION_DAYS`) remove history.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.models import ToolCall
from app.audit.repository import DeletedResourceRepository

HISTORY_KINDS = ("agent", "connector", "database", "mcp")


class RemembersDeleted:
    """Mixed into a `CrudService`: deleting a row leaves its tombstone (same transaction)."""

    history_kind: ClassVar[str]

    async def deleted(self, session: AsyncSession, obj: Any) -> None:
        await DeletedResourceRepository(session).remember(self.history_kind, obj.id, obj.name)


async def deleted_names(session: AsyncSession, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Which of `ids` belong to deleted resources: id → the name they had."""
    return await DeletedResourceRepository(session).names(ids)


def target_of(row: ToolCall) -> tuple[str, str] | None:
    """(kind, resource name) of the resource a call reached (`connector:jira/create_issue`)."""
    kind, sep, rest = (row.target or "").partition(":")
    if not sep or kind not in HISTORY_KINDS or not rest:
        return None
    return kind, rest.partition("/")[0]


async def deleted_targets(session: AsyncSession, rows: Sequence[ToolCall]) -> set[uuid.UUID]:
    """Ids of the calls whose resource was deleted since (names are unique per kind, so the
    resource of that name deleted after the call is the one it reached)."""
    targets = {row.id: t for row in rows if (t := target_of(row)) is not None}
    deleted = await DeletedResourceRepository(session).deleted_at(set(targets.values()))
    return {
        row.id
        for row in rows
        if row.id in targets
        and targets[row.id] in deleted
        and _aware(deleted[targets[row.id]]) >= _aware(row.created_at)
    }


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
