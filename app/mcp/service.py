from __future__ import annotations

import asyncio
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.tombstones import RemembersDeleted
from app.db.base import utcnow
from app.db.row_cache import RowCache
from app.errors import Invalid, NotFound, QuiverError, error_body
from app.kit.crud import CrudService
from app.kit.schemas import ToolCallResult
from app.mcp.config_import import parse_entry, servers_of
from app.mcp.models import McpServer
from app.mcp.pool import McpPool
from app.mcp.repository import McpServerRepository
from app.mcp.schemas import (
    McpCallRequest,
    McpImportRead,
    McpImportResult,
    McpServerCreate,
    McpServerCreated,
    McpServerUpdate,
    check_transport,
)
from app.tools.base import CallContext
from app.tools.suggest import unknown_name
from app.tools.timing import timed_tool_call
from app.tools.validation import invalid_arguments, validate_arguments


class McpServerService(RemembersDeleted, CrudService[McpServer]):
    history_kind = "mcp"
    repository = McpServerRepository
    label = "MCP server"

    async def create(
        self, session: AsyncSession, data: McpServerCreate, pool: McpPool | None = None
    ) -> McpServer:
        """Store the server (with the pool, a stdio command off the allow-list is a 422 here,
        not first at connect). `list_new_tools` then lists its tools so chats see them."""
        await self.ensure_name_free(session, data.name)
        if pool is not None:
            pool.check_command(data.transport, data.command)
        return await self.save(session, McpServer(**data.model_dump()))

    async def create_listed(
        self, session: AsyncSession, data: McpServerCreate, pool: McpPool
    ) -> McpServerCreated:
        server = await self.create(session, data, pool)
        error = await list_new_tools(server, pool)
        if error is None:
            server = await self.save(session, server)
        return McpServerCreated.model_validate(server).model_copy(update={"tools_error": error})

    async def import_document(
        self, session: AsyncSession, document: dict[str, Any], pool: McpPool
    ) -> McpImportRead:
        """Create each server of a client's MCP configuration; one result per server (a
        refused one leaves nothing behind and the others go on). Tools are listed for all the
        created servers at once."""
        results: list[McpImportResult] = []
        created: list[tuple[int, McpServer]] = []
        for key, raw in servers_of(document).items():
            entry = parse_entry(str(key), raw)
            result = McpImportResult(name=entry.key, status="failed", warnings=entry.warnings)
            results.append(result)
            if entry.server is None:
                assert entry.error is not None
                result.error = error_body(entry.error.kind, entry.error.message)
                continue
            try:
                async with session.begin_nested():
                    server = await self.create(session, entry.server, pool)
            except QuiverError as exc:
                result.error = error_body(exc.kind, f"{entry.key}: {exc.message}")
                continue
            created.append((len(results) - 1, server))
        errors = await asyncio.gather(*(list_new_tools(server, pool) for _, server in created))
        for (index, server), error in zip(created, errors, strict=True):
            if error is None:
                server = await self.save(session, server)
            results[index].status = "created"
            results[index].server = McpServerCreated.model_validate(server).model_copy(
                update={"tools_error": error}
            )
        done = sum(r.status == "created" for r in results)
        return McpImportRead(created=done, failed=len(results) - done, servers=results)

    async def update(
        self,
        session: AsyncSession,
        id: uuid.UUID,
        data: McpServerUpdate,
        pool: McpPool | None = None,
    ) -> McpServer:
        server = await self.get(session, id)
        if data.name is not None:
            await self.ensure_name_free(session, data.name, current=id)
        changed = self.apply(server, data)
        try:
            check_transport(server.transport, command=server.command, url=server.url)
        except ValueError as exc:
            raise Invalid(str(exc)) from exc
        if pool is not None and changed & {"transport", "command"}:
            pool.check_command(server.transport, server.command)
        if changed & {"transport", "command", "args", "env", "url", "headers"}:
            server.tools_cache = []
            server.tools_refreshed_at = None
        return await self.save(session, server)

    async def refresh(self, session: AsyncSession, id: uuid.UUID, pool: McpPool) -> McpServer:
        """Connect (or reuse the session), list the tools and store them on the row."""
        server = await self.get(session, id)
        server.tools_cache = await pool.list_tools(server)
        server.tools_refreshed_at = utcnow()
        return await self.save(session, server)

    async def test_call(
        self,
        id: uuid.UUID,
        data: McpCallRequest,
        pool: McpPool,
        servers: RowCache[McpServer],
    ) -> ToolCallResult:
        """Call one tool as the model's `mcp call` would: arguments checked against its schema.
        The server's row comes from `servers` (a warm call opens no session)."""
        server = await servers.get(id)
        if server is None:
            raise NotFound(f"{self.label} {str(id)!r} not found")
        known = {t.get("name"): t for t in server.tools_cache or []}
        tool = known.get(data.tool)
        if known and tool is None:
            return ToolCallResult(
                ok=False,
                output="",
                elapsed_ms=0.0,
                error=unknown_name("tool", data.tool, list(known)),
            )
        problem = (
            validate_arguments(tool.get("input_schema") or {}, data.arguments) if tool else None
        )
        if problem:
            return ToolCallResult(
                ok=False, output="", elapsed_ms=0.0, error=invalid_arguments(data.tool, problem)
            )
        return await timed_tool_call(pool.call(server, data.tool, data.arguments, CallContext()))


async def list_new_tools(server: McpServer, pool: McpPool) -> str | None:
    """List a new server's tools onto its row (stored with it): None, or why it could not
    (the server is created all the same; `/refresh` lists them later)."""
    limit = min(LIST_ON_CREATE_S, server.connect_timeout_s + server.call_timeout_s)
    try:
        async with asyncio.timeout(limit):
            tools = await pool.list_tools(server)
    except TimeoutError:
        return f"listing its tools took over {limit:g}s; POST /mcp-servers/{{id}}/refresh later"
    except QuiverError as exc:
        return exc.message
    server.tools_cache = tools
    server.tools_refreshed_at = utcnow()
    return None


LIST_ON_CREATE_S = 30.0
"""The longest a create waits for a new server's tool list (npx may download the package)."""

mcp_server_service = McpServerService()
