"""`database(subcommand=list_tables|discover|query|search, database?, table?, sql?, query?)`.

list_tables and discover answer from the cached schema (hidden tables never appear);
only query reaches the live database, through the back-end's read-only guard. search ranks
every database and table for a query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from app.databases.backend import DatabaseBackend
from app.databases.models import DatabaseConnector
from app.pipeline.sources.disclosure import Entry, Source, source
from app.pipeline.sources.meta_base import KindMetaTool
from app.pipeline.sources.rows import ColumnInfo, ForeignKeyInfo, TableInfo, visible_tables
from app.tools.base import CallContext, ToolResult
from app.tools.cache import DERIVED, row_key
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, one_line
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

NAME = "database"
SUBCOMMANDS = ("list_tables", "discover", "query", "search")
DISCOVER_LISTED = 10
_INTRO = (
    "SQL databases. list_tables; discover: a table's columns; query: one read-only SELECT;"
    " search: find by query."
)
_SEARCH_HINT = "Use discover with database=<name> and table=<name> for the columns."


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


def _table_entries(database: DatabaseConnector) -> list[Entry]:
    return DERIVED.get(
        row_key(database, "search"),
        lambda: [
            Entry(f"{database.name}/{t.name}", t.description) for t in visible_tables(database)
        ],
    )


def _database_source(database: DatabaseConnector) -> Source:
    return DERIVED.get(
        row_key(database, "source"),
        lambda: source(
            database.name,
            database.description,
            [(t.name, t.description) for t in visible_tables(database)],
        ),
    )


class DatabaseMetaTool(KindMetaTool[DatabaseConnector]):
    name = NAME
    row_field = "database"
    row_label = "database"
    intro = _INTRO
    heading = "Databases"
    catalog_noun = "Tables"
    search_noun = "databases and tables"
    search_hint = _SEARCH_HINT
    subcommands = SUBCOMMANDS
    properties: ClassVar[dict[str, Any]] = {
        "table": {"type": "string"},
        "sql": {"type": "string"},
    }

    def __init__(
        self,
        databases: Sequence[DatabaseConnector],
        backend: DatabaseBackend,
        query: str = "",
        inline_max: int | None = None,
    ) -> None:
        super().__init__(databases, query, inline_max)
        self._backend = backend

    def name_of(self, row: DatabaseConnector) -> str:
        return row.name

    def source_of(self, row: DatabaseConnector) -> Source:
        return _database_source(row)

    def entries_of(self, row: DatabaseConnector) -> list[Entry]:
        return _table_entries(row)

    async def run(
        self, subcommand: str, row: DatabaseConnector, args: dict[str, Any], ctx: CallContext
    ) -> ToolResult:
        match subcommand:
            case "list_tables":
                return ToolResult.success(clip_output(list_tables_text(row)))
            case "discover":
                return self._discover(row, args.get("table"))
            case "query":
                return await run_query(self._backend, row, args.get("sql"), ctx, NAME)
            case other:
                return self.unknown_subcommand(other)

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
    databases: Sequence[DatabaseConnector],
    backend: DatabaseBackend,
    query: str = "",
    inline_max: int | None = None,
) -> FunctionToolset:
    """The database meta-tool; `query` (the user's message) ranks a capped stub."""
    tool = DatabaseMetaTool(databases, backend, query, inline_max)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="databases")
