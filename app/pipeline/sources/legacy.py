"""Legacy mode: one tool per action / table operation / MCP tool, named `{resource}__{leaf}`.

Names pass through one `NameAllocator` per assembly so they are sanitised and unique
across every kind (a collision gets a `_2` suffix).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from app.connectors.actions import action_step
from app.connectors.backend import ConnectorBackend
from app.connectors.catalog import ACTIONS
from app.connectors.models import Connector, ConnectorAction
from app.databases.backend import DatabaseBackend
from app.databases.models import DatabaseConnector
from app.mcp.backend import McpBackend
from app.mcp.models import McpServer
from app.pipeline import index_builds
from app.pipeline.sources.meta_connector import action_hints, confirmation_needed
from app.pipeline.sources.meta_database import (
    describe_table,
    find_table,
    list_tables_text,
    run_query,
)
from app.pipeline.sources.rows import McpToolInfo, mcp_tools, visible_table_names
from app.pipeline.sources.stubs import connector_key
from app.tools.base import CallContext, SearchHints, ToolDef, ToolResult
from app.tools.cache import DERIVED, row_key
from app.tools.function import FunctionTool, FunctionToolset, Handler, with_step
from app.tools.names import NameAllocator, sanitize_tool_name
from app.tools.render import clip_output, model_schema, one_line


def _connector_handler(
    backend: ConnectorBackend, connector: Connector, action: ConnectorAction
) -> Handler:
    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if action.requires_confirmation and not ctx.approved:
            return confirmation_needed(connector, action)
        result = await backend.execute(connector, action, args, ctx)
        return with_step(result, action_step(connector, action))

    return handle


def connector_tool_def(connector: Connector, action: ConnectorAction) -> ToolDef:
    """An action's legacy tool; its method, path, tags and connector feed the rankers."""
    return ToolDef(
        name=sanitize_tool_name(f"{connector.name}__{action.name}"),
        description=one_line(action.description) or f"{action.method} {action.path}",
        parameters=model_schema(action.parameters),
        kind="connector",
        target=action_step(connector, action),
        hints=action_hints(connector, action),
    )


BUILT: Counter[uuid.UUID] = Counter()
"""Per connector, how many times its legacy definitions were built in this process (tests)."""


def _connector_defs(connector: Connector) -> tuple[ToolDef, ...]:
    BUILT[connector.id] += 1
    return tuple(connector_tool_def(connector, action) for action in connector.actions)


def prepare_connector(connector: Connector) -> tuple[ToolDef, ...]:
    """The connector's legacy definitions, built (and their quick-match tokens taken) once,
    as its import stores it: the first chat after it finds them (`ActionCatalog.remember`)."""
    defs = DERIVED.get(connector_key(connector, "legacy"), partial(_connector_defs, connector))
    index_builds.prepare(defs)
    return defs


ACTIONS.on_remember(prepare_connector)


def connector_tools(
    connectors: Sequence[Connector], backend: ConnectorBackend, names: NameAllocator
) -> FunctionToolset:
    tools: list[FunctionTool] = []
    for connector in connectors:
        defs = DERIVED.get(connector_key(connector, "legacy"), partial(_connector_defs, connector))
        for action, tool in zip(connector.actions, defs, strict=True):
            handler = _connector_handler(backend, connector, action)
            tools.append(FunctionTool(tool=_named(tool, names), handler=handler))
    return FunctionToolset(tools, label="connectors")


def _named(tool: ToolDef, names: NameAllocator) -> ToolDef:
    """The cached definition under the name this assembly allocated (unique per toolset)."""
    name = names.allocate(tool.name)
    return tool if name == tool.name else replace(tool, name=name)


def _database_handlers(
    backend: DatabaseBackend, database: DatabaseConnector, query_tool: str
) -> tuple[Handler, Handler, Handler]:
    async def list_tables(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult.success(clip_output(list_tables_text(database)))

    async def describe(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        found = find_table(database, str(args.get("table", "")))
        if isinstance(found, ToolResult):
            return found
        return ToolResult.success(clip_output(describe_table(database, found)))

    async def query(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return await run_query(backend, database, args.get("sql"), ctx, query_tool)

    return list_tables, describe, query


def _database_defs(database: DatabaseConnector) -> tuple[ToolDef, ...]:
    label = f"database {database.name!r} ({database.dialect})"
    about = one_line(database.description)
    suffix = f": {about}" if about else ""
    tables = visible_table_names(database)
    target = f"database:{database.name}"
    return (
        ToolDef(
            name=sanitize_tool_name(f"{database.name}__list_tables"),
            description=f"List the tables of {label}{suffix}",
            kind="database",
            target=f"{target}/list_tables",
        ),
        ToolDef(
            name=sanitize_tool_name(f"{database.name}__describe_table"),
            description=f"Describe the columns of one table of {label}.",
            parameters={
                "type": "object",
                "properties": {"table": {"type": "string", "enum": tables}},
                "required": ["table"],
                "additionalProperties": False,
            },
            kind="database",
            target=f"{target}/describe_table",
        ),
        ToolDef(
            name=sanitize_tool_name(f"{database.name}__query"),
            description=(
                f"Run one read-only SQL query on {label}; at most {database.max_rows} rows."
            ),
            parameters={
                "type": "object",
                "properties": {"sql": {"type": "string"}},
                "required": ["sql"],
                "additionalProperties": False,
            },
            kind="database",
            target=f"{target}/query",
        ),
    )


def database_tools(
    databases: Sequence[DatabaseConnector], backend: DatabaseBackend, names: NameAllocator
) -> FunctionToolset:
    tools: list[FunctionTool] = []
    for database in databases:
        cached = DERIVED.get(row_key(database, "legacy"), partial(_database_defs, database))
        defs = tuple(_named(tool, names) for tool in cached)
        handlers = _database_handlers(backend, database, defs[2].name)
        tools.extend(FunctionTool(tool=d, handler=h) for d, h in zip(defs, handlers, strict=True))
    return FunctionToolset(tools, label="databases")


def _mcp_handler(backend: McpBackend, server: McpServer, tool: McpToolInfo) -> Handler:
    async def handle(args: dict[str, Any], ctx: CallContext) -> ToolResult:
        result = await backend.call(server, tool.name, args, ctx)
        return with_step(result, f"mcp:{server.name}/{tool.name}")

    return handle


def _mcp_defs(server: McpServer) -> tuple[tuple[McpToolInfo, ToolDef], ...]:
    return tuple(
        (
            info,
            ToolDef(
                name=sanitize_tool_name(f"{server.name}__{info.name}"),
                description=info.description.strip(),
                parameters=model_schema(info.input_schema),
                kind="mcp",
                target=f"mcp:{server.name}/{info.name}",
                hints=SearchHints(source=server.name, source_description=server.description),
            ),
        )
        for info in mcp_tools(server)
    )


def mcp_tools_legacy(
    servers: Sequence[McpServer], backend: McpBackend, names: NameAllocator
) -> FunctionToolset:
    tools: list[FunctionTool] = []
    for server in servers:
        defs = DERIVED.get(row_key(server, "legacy"), partial(_mcp_defs, server))
        for info, tool in defs:
            handler = _mcp_handler(backend, server, info)
            tools.append(FunctionTool(tool=_named(tool, names), handler=handler))
    return FunctionToolset(tools, label="mcp")
