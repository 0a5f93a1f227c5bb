from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from app.databases.engines import EngineCache
from app.databases.introspect import introspect, merge_schema
from app.databases.query import QueryFailed
from app.pipeline.sources.meta_database import describe_table, find_table, list_tables_text
from app.pipeline.sources.rows import TableInfo, visible_table_names
from tests.databases.conftest import DIALECTS, make_connector
from tests.databases.seed import SeededDb


def _by_name(tables: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in tables}


@pytest.mark.parametrize("dialect", DIALECTS)
async def test_introspection_reads_tables_columns_types_keys_and_comments(
    dialect: str, seeded: dict[str, SeededDb], engine_cache: EngineCache
) -> None:
    tables = _by_name(await introspect(make_connector(seeded[dialect]), engine_cache))
    assert {"customers", "orders", "secrets", "audit_log", "big_numbers", "kinds"} <= set(tables)
    customers = tables["customers"]
    assert customers["hidden"] is False
    columns = {c["name"]: c for c in customers["columns"]}
    assert list(columns) == ["id", "name", "email", "country", "created_at"]
    assert columns["id"]["primary_key"] is True
    assert columns["name"]["primary_key"] is False
    assert columns["name"]["nullable"] is False
    assert columns["email"]["nullable"] is True
    assert columns["name"]["type"] == "VARCHAR(100)"
    amount = next(c for c in tables["orders"]["columns"] if c["name"] == "amount")
    assert amount["type"] in ("NUMERIC(10, 2)", "DECIMAL(10, 2)")
    if dialect != "sqlite":
        assert customers["description"] == "Customer master data"
        assert columns["country"]["description"] == "ISO 3166 alpha-2"


async def test_postgres_tables_outside_the_default_schema_are_qualified(
    pg_db: SeededDb, engine_cache: EngineCache
) -> None:
    admin = await asyncpg.connect(pg_db.url)
    try:
        await admin.execute("CREATE SCHEMA analytics")
        await admin.execute("CREATE TABLE analytics.daily (day DATE PRIMARY KEY, n INTEGER)")
        tables = _by_name(await introspect(make_connector(pg_db), engine_cache))
    finally:
        await admin.execute("DROP SCHEMA analytics CASCADE")
        await admin.close()
    assert "analytics.daily" in tables
    assert tables["analytics.daily"]["columns"][0]["primary_key"] is True
    assert "pg_catalog.pg_class" not in tables
    assert not any(name.startswith("information_schema.") for name in tables)


async def test_introspection_failure_is_a_clean_database_error(engine_cache: EngineCache) -> None:
    dead = make_connector(
        SeededDb("postgresql", "postgresql://postgres:Hunter2Secret@127.0.0.1:1/x", "x")
    )
    with pytest.raises(QueryFailed) as failed:
        await introspect(dead, engine_cache)
    assert failed.value.message.startswith("[Database Error]")
    assert "Hunter2Secret" not in failed.value.message


def test_merge_keeps_admin_flags_and_descriptions_for_tables_that_still_exist() -> None:
    old = [
        {"name": "secrets", "description": "", "hidden": True, "columns": []},
        {"name": "orders", "description": "All orders (admin)", "hidden": False,
         "columns": [{"name": "id", "type": "INTEGER", "nullable": False, "primary_key": True,
                      "description": "Order number"}]},
        {"name": "gone", "description": "x", "hidden": True, "columns": []},
    ]  # fmt: skip
    new = [
        {"name": "orders", "description": "db comment", "hidden": False,
         "columns": [{"name": "id", "type": "BIGINT", "nullable": False, "primary_key": True,
                      "description": ""},
                     {"name": "note", "type": "TEXT", "nullable": True, "primary_key": False,
                      "description": "new column"}]},
        {"name": "secrets", "description": "", "hidden": False, "columns": []},
        {"name": "fresh", "description": "", "hidden": False, "columns": []},
    ]  # fmt: skip
    merged = _by_name(merge_schema(old, new))
    assert set(merged) == {"orders", "secrets", "fresh"}
    assert merged["secrets"]["hidden"] is True
    assert merged["fresh"]["hidden"] is False
    assert merged["orders"]["description"] == "All orders (admin)"
    columns = {c["name"]: c for c in merged["orders"]["columns"]}
    assert columns["id"] == {"name": "id", "type": "BIGINT", "nullable": False,
                             "primary_key": True, "description": "Order number"}  # fmt: skip
    assert columns["note"]["description"] == "new column"


def _cached_connector(**overrides: Any) -> Any:
    # A dead URL proves the formatters answer from the cache alone.
    db = SeededDb("postgresql", "postgresql://nobody@127.0.0.1:1/none", "none")
    cache = [
        {"name": "customers", "description": "Customer master data", "hidden": False,
         "columns": [{"name": "id", "type": "INTEGER", "nullable": False, "primary_key": True,
                      "description": ""},
                     {"name": "country", "type": "VARCHAR(2)", "nullable": True,
                      "primary_key": False, "description": "ISO 3166\nalpha-2"}]},
        {"name": "secrets", "description": "do not show", "hidden": True,
         "columns": [{"name": "api_key", "type": "TEXT", "nullable": False,
                      "primary_key": False, "description": ""}]},
        {"name": "orders", "description": "", "hidden": False, "columns": []},
    ]  # fmt: skip
    return make_connector(db, name="shop", schema_cache=overrides.get("schema_cache", cache))


def test_table_list_shows_names_descriptions_and_column_counts_without_hidden_tables() -> None:
    text = list_tables_text(_cached_connector())
    assert "- customers: Customer master data (2 columns)" in text
    assert "- orders (0 columns)" in text
    assert "secrets" not in text
    assert visible_table_names(_cached_connector()) == ["customers", "orders"]


def test_table_schema_lists_columns_and_refuses_hidden_or_unknown_tables() -> None:
    conn = _cached_connector()
    table = find_table(conn, "customers")
    assert isinstance(table, TableInfo)
    text = describe_table(conn, table)
    assert "- id INTEGER primary key not null" in text
    assert "- country VARCHAR(2): ISO 3166 alpha-2" in text
    assert not isinstance(find_table(conn, "secrets"), TableInfo)
    assert not isinstance(find_table(conn, "nope"), TableInfo)


def test_empty_cache_says_so() -> None:
    text = list_tables_text(_cached_connector(schema_cache=[]))
    assert "has no tables in its schema cache" in text
