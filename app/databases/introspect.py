"""Schema introspection into the stored cache, and the text the meta-tool shows.

`introspect` is the only function here that touches the live database; `list_tables`
and `discover` answer from `DatabaseConnector.schema_cache` through the formatters.
Cache format: `[{name, description, hidden, columns: [{name, type, nullable,
primary_key, description}], foreign_keys: [{columns, references_table,
references_columns}]}]`; tables outside the default schema are named `schema.table` (in
`references_table` too). Foreign keys tell the model how to join.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.engine import Connection, Inspector
from sqlalchemy.engine.reflection import ObjectKind
from sqlalchemy.exc import SQLAlchemyError

from app.databases.engines import EngineCache
from app.databases.models import DatabaseConnector
from app.databases.query import QueryFailed, QueryTimeout
from app.databases.values import clean_driver_message

INTROSPECT_TIMEOUT_S = 120.0
MAX_LISTED_TABLES = 500
_SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "pg_toast"})


async def introspect(db: DatabaseConnector, engines: EngineCache) -> list[dict[str, Any]]:
    """Read tables, columns, types, nullability, primary keys and comments from `db`."""
    try:
        engine = await engines.get(db)
        async with asyncio.timeout(INTROSPECT_TIMEOUT_S), engine.connect() as conn:
            tables = await conn.run_sync(_reflect)
            await conn.rollback()
    except TimeoutError:
        raise QueryTimeout(f"introspection ran longer than {INTROSPECT_TIMEOUT_S:g}s") from None
    except (SQLAlchemyError, OSError) as exc:
        raise QueryFailed(clean_driver_message(exc, db.url)) from None
    return tables


def _reflect(conn: Connection) -> list[dict[str, Any]]:
    inspector = inspect(conn)
    default = inspector.default_schema_name
    tables: list[dict[str, Any]] = []
    for schema in _schemas(inspector, conn.dialect.name):
        prefix = "" if schema is None or schema == default else f"{schema}."
        tables += _reflect_schema(inspector, None if prefix == "" else schema, prefix)
    return sorted(tables, key=lambda t: str(t["name"]))


def _schemas(inspector: Inspector, dialect: str) -> list[str | None]:
    if dialect != "postgresql":
        return [None]  # MySQL: the connection's database; SQLite: main
    names = [
        s
        for s in inspector.get_schema_names()
        if s not in _SYSTEM_SCHEMAS and not s.startswith(("pg_temp", "pg_toast"))
    ]
    default = inspector.default_schema_name
    return [None, *(s for s in names if s != default)]


def _reflect_schema(inspector: Inspector, schema: str | None, prefix: str) -> list[dict[str, Any]]:
    kind = ObjectKind.TABLE | ObjectKind.VIEW | ObjectKind.MATERIALIZED_VIEW
    columns = inspector.get_multi_columns(schema=schema, kind=kind)
    primary = inspector.get_multi_pk_constraint(schema=schema, kind=kind)
    try:
        comments = inspector.get_multi_table_comment(schema=schema, kind=kind)
    except NotImplementedError:  # SQLite has no comments
        comments = {}
    foreign = inspector.get_multi_foreign_keys(schema=schema, kind=kind)
    default = inspector.default_schema_name
    tables = []
    for key, cols in columns.items():
        constraint = primary.get(key)
        pk = set(constraint["constrained_columns"] if constraint else ())
        table_comment = comments.get(key)
        comment = (table_comment["text"] if table_comment else None) or ""
        tables.append(
            {
                "name": f"{prefix}{key[1]}",
                "description": comment,
                "hidden": False,
                "columns": [_column(c, pk) for c in cols],
                "foreign_keys": [_foreign_key(fk, default) for fk in foreign.get(key) or []],
            }
        )
    return tables


def _foreign_key(fk: Any, default: str | None) -> dict[str, Any]:
    schema = fk.get("referred_schema")
    prefix = "" if schema is None or schema == default else f"{schema}."
    return {
        "columns": list(fk["constrained_columns"]),
        "references_table": f"{prefix}{fk['referred_table']}",
        "references_columns": list(fk["referred_columns"]),
    }


def _column(col: Any, pk: set[str]) -> dict[str, Any]:
    try:
        type_name = str(col["type"])
    except Exception:  # types without a generic rendering
        type_name = type(col["type"]).__name__
    return {
        "name": col["name"],
        "type": type_name,
        "nullable": bool(col.get("nullable", True)),
        "primary_key": col["name"] in pk,
        "description": col.get("comment") or "",
    }


def merge_schema(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fresh introspection, keeping admin-set `hidden` flags and descriptions that exist."""
    previous = {str(t.get("name")): t for t in old or [] if isinstance(t, dict)}
    merged = []
    for table in new:
        before = previous.get(str(table["name"]))
        if before is None:
            merged.append(table)
            continue
        old_columns = {str(c.get("name")): c for c in before.get("columns") or []}
        columns = [
            {**c, "description": (old_columns.get(c["name"]) or {}).get("description")
             or c.get("description", "")}
            for c in table["columns"]
        ]  # fmt: skip
        merged.append(
            {
                **table,
                "hidden": bool(before.get("hidden", False)),
                "description": before.get("description") or table.get("description", ""),
                "columns": columns,
            }
        )
    return merged


def visible_tables(db: DatabaseConnector) -> list[dict[str, Any]]:
    """Tables in the cache that the model may see."""
    return [t for t in db.schema_cache or [] if isinstance(t, dict) and not t.get("hidden", False)]


def format_table_list(db: DatabaseConnector) -> str:
    """`list_tables`: names, descriptions and column counts (hidden tables omitted)."""
    tables = visible_tables(db)
    if not tables:
        return (
            f"Database {db.name!r} has no tables in its schema cache. "
            "An admin can refresh it with POST /api/v1/databases/{id}/introspect."
        )
    lines = [f"Database {db.name!r} ({db.dialect}), {len(tables)} tables:"]
    for table in tables[:MAX_LISTED_TABLES]:
        count = len(table.get("columns") or [])
        line = f"- {table['name']} ({count} columns)"
        description = _one_line(table.get("description"))
        lines.append(f"{line}: {description}" if description else line)
    if len(tables) > MAX_LISTED_TABLES:
        lines.append(f"… and {len(tables) - MAX_LISTED_TABLES} more")
    lines.append("Use subcommand=discover with table=<name> for column schemas.")
    return "\n".join(lines)


def find_table(db: DatabaseConnector, table: str) -> dict[str, Any] | None:
    """A visible table by exact name, then case-insensitively."""
    tables = visible_tables(db)
    for candidate in tables:
        if candidate.get("name") == table:
            return candidate
    wanted = table.lower()
    return next((t for t in tables if str(t.get("name", "")).lower() == wanted), None)


def format_table_schema(db: DatabaseConnector, table: str) -> str | None:
    """`discover`: column schemas of one visible table; None if unknown or hidden."""
    found = find_table(db, table)
    if found is None:
        return None
    head = f"Table {found['name']}"
    description = _one_line(found.get("description"))
    lines = [f"{head}: {description}" if description else head, "Columns:"]
    lines += [_format_column(c) for c in found.get("columns") or []]
    return "\n".join(lines)


def table_names(db: DatabaseConnector) -> list[str]:
    """Visible table names, for enums and "did you mean" hints."""
    return [str(t["name"]) for t in visible_tables(db) if t.get("name")]


def _format_column(col: dict[str, Any]) -> str:
    flags: Iterable[str] = (
        flag
        for flag, on in (
            ("PRIMARY KEY", col.get("primary_key")),
            ("NOT NULL", not col.get("nullable", True)),
        )
        if on
    )
    text = " ".join([f"- {col.get('name')}", str(col.get("type", "")), *flags])
    description = _one_line(col.get("description"))
    return f"{text} — {description}" if description else text


def _one_line(text: Any, limit: int = 200) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
