from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select

from app.audit.models import DeletedResource, ToolCall
from app.kit.repository import RepositoryBase
from app.tenancy.principal import Principal
from app.tenancy.repository import visible_to


class ToolCallRepository(RepositoryBase[ToolCall]):
    model = ToolCall

    async def run_tool_sets(self, agent_id: uuid.UUID, *, runs: int, calls: int) -> list[list[str]]:
        """The tool names each of the agent's most recent runs called, newest run first.

        Reads the agent's last `calls` audit rows (index `agent_id, created_at`), so the cost
        is bounded however long the agent has lived, and keeps at most `runs` runs; a run
        whose first calls are older than that window counts with the calls inside it.
        """
        stmt = (
            select(ToolCall.run_id, ToolCall.name)
            .where(ToolCall.agent_id == agent_id, ToolCall.run_id.is_not(None))
            .order_by(ToolCall.created_at.desc())
            .limit(calls)
        )
        sets: dict[uuid.UUID | None, dict[str, None]] = {}
        for run_id, name in await self.session.execute(stmt):
            if run_id not in sets:
                if len(sets) >= runs:
                    continue
                sets[run_id] = {}
            sets[run_id][name] = None
        return [list(names) for names in sets.values()]

    async def page(
        self,
        principal: Principal,
        *,
        run_id: uuid.UUID | None,
        kind: str | None,
        name: str | None,
        ok: bool | None,
        limit: int,
        offset: int,
    ) -> tuple[list[ToolCall], int]:
        stmt = (
            select(ToolCall)
            .where(visible_to(ToolCall, principal))
            .order_by(ToolCall.created_at.desc())
        )
        if run_id is not None:
            stmt = stmt.where(ToolCall.run_id == run_id)
        if kind is not None:
            stmt = stmt.where(ToolCall.kind == kind)
        if name is not None:
            stmt = stmt.where(ToolCall.name == name)
        if ok is not None:
            stmt = stmt.where(ToolCall.ok.is_(ok))
        return await self.paginate(limit=limit, offset=offset, stmt=stmt)


class DeletedResourceRepository(RepositoryBase[DeletedResource]):
    model = DeletedResource

    async def remember(self, kind: str, id: uuid.UUID, name: str) -> None:
        if await self.session.get(DeletedResource, id) is None:
            self.session.add(DeletedResource(id=id, kind=kind, name=name[:256]))

    async def names(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """Deleted resources among `ids`: id → name."""
        wanted = set(ids)
        if not wanted:
            return {}
        stmt = select(DeletedResource.id, DeletedResource.name).where(
            DeletedResource.id.in_(wanted)
        )
        return {row.id: row.name for row in await self.session.execute(stmt)}

    async def deleted_at(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], datetime]:
        """(kind, name) → when the latest resource of that kind and name was deleted."""
        wanted = set(keys)
        if not wanted:
            return {}
        stmt = select(DeletedResource.kind, DeletedResource.name, DeletedResource.deleted_at).where(
            DeletedResource.name.in_({name for _, name in wanted}),
            DeletedResource.kind.in_({kind for kind, _ in wanted}),
        )
        found: dict[tuple[str, str], datetime] = {}
        for kind, name, at in await self.session.execute(stmt):
            if (kind, name) in wanted and ((kind, name) not in found or at > found[kind, name]):
                found[kind, name] = at
        return found
