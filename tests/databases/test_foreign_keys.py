"""Introspection records foreign keys, and the database meta-tool's `discover` shows them so
the model knows how to join (Postgres, MariaDB and SQLite)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from app.databases.engines import EngineCache
from app.databases.introspect import introspect, merge_schema
from app.databases.models import DatabaseConnector
from app.tools.base import CallContext, ToolResult
from app.tools.meta.database import database_meta_toolset
from tests.databases.conftest import DIALECTS, make_connector
from tests.databases.seed import SeededDb

ORDERS_FK = {
    "columns": ["customer_id"],
    "references_table": "customers",
    "references_columns": ["id"],
}


class NoQueries:
    async def query(self, database: DatabaseConnector, sql: str, ctx: CallContext) -> ToolResult:
        raise AssertionError("discover answers from the schema cache")


async def discover(db: DatabaseConnector, table: str) -> str:
    toolset = database_meta_toolset([db], NoQueries())
    args = {"subcommand": "discover", "database": db.name, "table": table}
    result = await toolset.call_tool("database", args, CallContext())
    assert result.ok, result.error
    return result.output


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_foreign_keys_are_introspected_and_shown_by_discover(
    dialect: str, seeded: dict[str, SeededDb], engine_cache: EngineCache
) -> None:
    db = make_connector(seeded[dialect])
    tables = {t["name"]: t for t in await introspect(db, engine_cache)}
    assert tables["orders"]["foreign_keys"] == [ORDERS_FK]
    assert tables["customers"]["foreign_keys"] == []
    db.schema_cache = merge_schema(db.schema_cache or [], list(tables.values()))
    text = await discover(db, "orders")
    assert text.endswith("Foreign keys:\n- customer_id → customers.id"), text


async def test_composite_and_cross_schema_keys_on_postgres(
    pg_db: SeededDb, engine_cache: EngineCache
) -> None:
    admin = await asyncpg.connect(pg_db.url)
    try:
        await admin.execute("CREATE SCHEMA billing")
        await admin.execute(
            "CREATE TABLE billing.lines (order_id INTEGER REFERENCES public.orders(id), "
            "n INTEGER, PRIMARY KEY (order_id, n))"
        )
        await admin.execute(
            "CREATE TABLE line_notes (order_id INTEGER, n INTEGER, note TEXT, "
            "FOREIGN KEY (order_id, n) REFERENCES billing.lines (order_id, n))"
        )
        tables = {t["name"]: t for t in await introspect(make_connector(pg_db), engine_cache)}
    finally:
        await admin.execute("DROP TABLE line_notes")
        await admin.execute("DROP SCHEMA billing CASCADE")
        await admin.close()
    assert tables["billing.lines"]["foreign_keys"] == [
        {"columns": ["order_id"], "references_table": "orders", "references_columns": ["id"]}
    ]
    assert tables["line_notes"]["foreign_keys"] == [
        {
            "columns": ["order_id", "n"],
            "references_table": "billing.lines",
            "references_columns": ["order_id", "n"],
        }
    ]
    db = make_connector(pg_db, schema_cache=list(tables.values()))
    assert (await discover(db, "line_notes")).endswith(
        "Foreign keys:\n- (order_id, n) → billing.lines.(order_id, n)"
    )


def test_merge_takes_fresh_foreign_keys() -> None:
    old: list[dict[str, Any]] = [
        {"name": "orders", "description": "mine", "hidden": True, "columns": []}
    ]
    new = [
        {
            "name": "orders",
            "description": "",
            "hidden": False,
            "columns": [],
            "foreign_keys": [ORDERS_FK],
        }
    ]
    (merged,) = merge_schema(old, new)
    assert (merged["hidden"], merged["description"], merged["foreign_keys"]) == (
        True,
        "mine",
        [ORDERS_FK],
    )
