"""Typed views of the JSON caches stored on rows (database schema_cache, MCP tools_cache)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.databases.models import DatabaseConnector
from app.mcp.models import McpServer


@dataclass(frozen=True, kw_only=True)
class ColumnInfo:
    name: str
    type: str = ""
    nullable: bool = True
    primary_key: bool = False
    description: str = ""


@dataclass(frozen=True, kw_only=True)
class ForeignKeyInfo:
    columns: tuple[str, ...]
    references_table: str
    references_columns: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TableInfo:
    name: str
    description: str = ""
    hidden: bool = False
    columns: tuple[ColumnInfo, ...] = ()
    foreign_keys: tuple[ForeignKeyInfo, ...] = ()


@dataclass(frozen=True, kw_only=True)
class McpToolInfo:
    name: str
    description: str = ""
    input_schema: dict[str, Any]


def _column(raw: Any) -> ColumnInfo | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    return ColumnInfo(
        name=raw["name"],
        type=str(raw.get("type") or ""),
        nullable=bool(raw.get("nullable", True)),
        primary_key=bool(raw.get("primary_key", False)),
        description=str(raw.get("description") or ""),
    )


def _table(raw: Any) -> TableInfo | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return None
    columns = [c for c in map(_column, raw.get("columns") or []) if c is not None]
    keys = [k for k in map(_foreign_key, raw.get("foreign_keys") or []) if k is not None]
    return TableInfo(
        name=raw["name"],
        description=str(raw.get("description") or ""),
        hidden=bool(raw.get("hidden", False)),
        columns=tuple(columns),
        foreign_keys=tuple(keys),
    )


def _foreign_key(raw: Any) -> ForeignKeyInfo | None:
    if not isinstance(raw, dict) or not isinstance(raw.get("references_table"), str):
        return None
    return ForeignKeyInfo(
        columns=tuple(str(c) for c in raw.get("columns") or []),
        references_table=raw["references_table"],
        references_columns=tuple(str(c) for c in raw.get("references_columns") or []),
    )


def visible_table_names(database: DatabaseConnector) -> list[str]:
    """Names of the cached tables the model may see, without parsing their columns."""
    return [
        raw["name"]
        for raw in database.schema_cache or []
        if isinstance(raw, dict) and isinstance(raw.get("name"), str) and not raw.get("hidden")
    ]


def mcp_tool_names(server: McpServer) -> list[str]:
    """Names in an MCP server's cached tool list, without building the full views."""
    return [
        raw["name"]
        for raw in server.tools_cache or []
        if isinstance(raw, dict) and isinstance(raw.get("name"), str)
    ]


def visible_tables(database: DatabaseConnector) -> list[TableInfo]:
    """The cached tables the model may see (hidden tables never reach it)."""
    tables = (_table(raw) for raw in database.schema_cache or [])
    return [t for t in tables if t is not None and not t.hidden]


def mcp_tools(server: McpServer) -> list[McpToolInfo]:
    """The cached tool list of an MCP server, skipping malformed entries."""
    tools: list[McpToolInfo] = []
    for raw in server.tools_cache or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            continue
        schema = raw.get("input_schema") or raw.get("inputSchema") or {}
        tools.append(
            McpToolInfo(
                name=raw["name"],
                description=str(raw.get("description") or ""),
                input_schema=schema if isinstance(schema, dict) else {},
            )
        )
    return tools
