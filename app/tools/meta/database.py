"""`database(subcommand=list_tables|discover|query, database, table?, sql?)` (SPEC §4.3, §7.2).

list_tables and discover answer from the cached schema (hidden tables never appear);
only query reaches the live database, through the back-end's read-only guard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.databases.models import DatabaseConnector
from app.tools.backends import DatabaseBackend
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, one_line
from app.tools.rows import ColumnInfo, ForeignKeyInfo, TableInfo, visible_tables
from app.tools.stubs import database_stub
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

NAME = "database"
SUBCOMMANDS = ("list_tables", "discover", "query")
DISCOVER_LISTED = 10
_INTRO = "SQL databases. list_tables; discover: a table's columns; query: one read-only SELECT."


def table_line(table: TableInfo) -> str:
    """`- orders: Customer orders (8 columns)`."""
    text = f"- {table.name}"
    if table.description:
        text += f": {one_line(table.description)}"
    return f"{text} ({len(table.columns)} columns)"


def column_line(column: ColumnInfo) -> str:
    """`- id integer primary key not null: description`."""
    text = f"- {column.name} {column.type}".rstrip()
    if column.primary_key:
        text += " primary key"
    if not column.nullable:
        text += " not null"
    if column.description:
        text += f": {one_line(column.description)}"
    return text


def describe_table(database: DatabaseConnector, table: TableInfo) -> str:
    head = f"Table {database.name}.{table.name}"
    if table.description:
        head += f": {one_line(table.description)}"
    keys = [foreign_key_line(k) for k in table.foreign_keys]
    joins = ["Foreign keys:", *keys] if keys else []
    return "\n".join([head, *(column_line(c) for c in table.columns), *joins])


def foreign_key_line(key: ForeignKeyInfo) -> str:
    """`- customer_id → customers.id`: how to join (composite: `(a, b) → t.(x, y)`)."""

    def side(columns: tuple[str, ...]) -> str:
        return columns[0] if len(columns) == 1 else f"({', '.join(columns)})"

    return f"- {side(key.columns)} → {key.references_table}.{side(key.references_columns)}"


def list_tables_text(database: DatabaseConnector) -> str:
    tables = visible_tables(database)
    if not tables:
        return f"Database {database.name!r} ({database.dialect}) has no tables in its schema cache."
    head = f"Database {database.name!r} ({database.dialect}), {len(tables)} tables:"
    return "\n".join([head, *(table_line(t) for t in tables)])


def find_table(database: DatabaseConnector, name: str) -> TableInfo | ToolResult:
    tables = visible_tables(database)
    for table in tables:
        if table.name == name:
            return table
    return ToolResult.fail(
        unknown_name("table", name, [t.name for t in tables], scope=f"database {database.name!r}")
    )


async def run_query(
    backend: DatabaseBackend, database: DatabaseConnector, sql: Any, ctx: CallContext, tool: str
) -> ToolResult:
    if not isinstance(sql, str) or not sql.strip():
        return ToolResult.fail(invalid_arguments(tool, "'sql' is required for a query"))
    result = await backend.query(database, sql, ctx)
    return with_step(result, f"database:{database.name}/query")


class DatabaseMetaTool:
    def __init__(self, databases: Sequence[DatabaseConnector], backend: DatabaseBackend) -> None:
        self._databases = {d.name: d for d in databases}
        self._backend = backend
        catalog = "\n".join(database_stub(d) for d in databases)
        self.tool = ToolDef(
            name=NAME,
            description=f"{_INTRO}\nDatabases:\n{catalog}",
            parameters={
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": list(SUBCOMMANDS)},
                    "database": {"type": "string", "enum": list(self._databases)},
                    "table": {"type": "string"},
                    "sql": {"type": "string"},
                },
                "required": ["subcommand", "database"],
            },
            kind="database",
            target="database",
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = str(args.get("database", ""))
        database = self._databases.get(name)
        if database is None:
            return ToolResult.fail(unknown_name("database", name, list(self._databases)))
        match args.get("subcommand"):
            case "list_tables":
                return ToolResult.success(clip_output(list_tables_text(database)))
            case "discover":
                return self._discover(database, args.get("table"))
            case "query":
                return await run_query(self._backend, database, args.get("sql"), ctx, NAME)
            case other:
                return ToolResult.fail(
                    f"Unknown subcommand {other!r}. Valid: {', '.join(SUBCOMMANDS)}."
                )

    def _discover(self, database: DatabaseConnector, table_name: Any) -> ToolResult:
        if table_name:
            found = find_table(database, str(table_name))
            if isinstance(found, ToolResult):
                return found
            return ToolResult.success(clip_output(describe_table(database, found)))
        tables = visible_tables(database)
        if not tables:
            return ToolResult.success(list_tables_text(database))
        blocks = [describe_table(database, t) for t in tables]
        rest = ", ".join(t.name for t in tables[DISCOVER_LISTED:])
        shown = capped(
            blocks, DISCOVER_LISTED, noun="tables", hint=f"pass table=<name> for one; {rest}"
        )
        return ToolResult.success(clip_output("\n\n".join(shown)))


def database_meta_toolset(
    databases: Sequence[DatabaseConnector], backend: DatabaseBackend
) -> FunctionToolset:
    tool = DatabaseMetaTool(databases, backend)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="databases")
