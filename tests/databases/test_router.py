from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.databases.models import DatabaseConnector
from tests.fixtures.crud import (
    assert_error,
    check_delete,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    create,
)

PATH = "/api/v1/databases"
PG_URL = "postgresql://reader:s3cret-pw@db.internal:5432/shop"

SCHEMA = [
    {
        "name": "orders",
        "description": None,
        "hidden": False,
        "columns": [
            {"name": "id", "type": "INTEGER", "nullable": False, "primary_key": True},
            {"name": "total", "type": "NUMERIC", "nullable": True, "primary_key": False},
        ],
    },
    {"name": "audit_log", "description": "internal", "hidden": False, "columns": []},
]


def database(name: str = "shop", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "Shop DB", "url": "sqlite:///shop.db", **extra}


async def seed_schema(
    sessionmaker: async_sessionmaker[AsyncSession], db_id: str, schema: list[Any]
) -> None:
    """Introspection belongs to another suite: write the cached schema directly."""
    async with sessionmaker() as session:
        row = await session.get(DatabaseConnector, uuid.UUID(db_id))
        assert row is not None
        row.schema_cache = schema
        await session.commit()


async def test_create_returns_201_with_masked_url(client: httpx.AsyncClient) -> None:
    created = await create(
        client, PATH, database(url=PG_URL, read_only=False, max_rows=10_000, query_timeout_s=300)
    )
    assert created["dialect"] == "postgresql"
    assert created["url"] == "postgresql://reader:***@db.internal:5432/shop"
    assert (created["read_only"], created["max_rows"], created["query_timeout_s"]) == (
        False,
        10_000,
        300,
    )
    assert created["tables"] == []
    assert created["introspected_at"] is None
    assert (await client.get(f"{PATH}/{created['id']}")).json() == created


async def test_create_applies_defaults(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "lite", "url": "sqlite:///data/app.db"})
    assert created["dialect"] == "sqlite"
    assert (created["read_only"], created["max_rows"], created["query_timeout_s"]) == (
        True,
        1000,
        30,
    )


async def test_dialect_follows_the_url(client: httpx.AsyncClient) -> None:
    for i, (url, dialect) in enumerate(
        [
            ("mysql://u:p@h/db", "mysql"),
            ("mariadb://u:p@h/db", "mysql"),
            ("postgresql+asyncpg://u@h/db", "postgresql"),
        ]
    ):
        assert (await create(client, PATH, database(f"db{i}", url=url)))["dialect"] == dialect


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [database("d1"), database("d2"), database("d3")])


async def test_patch_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, database())
    item = f"{PATH}/{created['id']}"
    resp = await client.patch(item, json={"max_rows": 50})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["max_rows"] == 50
    same = {k for k in created if k not in ("max_rows", "updated_at")}
    assert {k: patched[k] for k in same} == {k: created[k] for k in same}

    resp = await client.patch(item, json={"url": PG_URL})
    assert (resp.json()["dialect"], resp.json()["url"]) == (
        "postgresql",
        "postgresql://reader:***@db.internal:5432/shop",
    )


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, database())
    item = f"{PATH}/{created['id']}"
    for field in ("name", "description", "url", "read_only", "max_rows", "query_timeout_s"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])
    await check_patch_rejected(client, item, {"url": "oracle://x/y"}, mentions=["url"])


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, database())
    await check_delete(client, PATH, created["id"])


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"name": "x"}, "url"),
    (database(url=""), "url"),
    (database(url="oracle://u:p@h/db"), "url"),
    (database(url="sqlite:relative.db"), "url"),
    (database(url="u" * 4097), "url"),
    (database(url=42), "url"),
    (database(max_rows=0), "max_rows"),
    (database(max_rows=10_001), "max_rows"),
    (database(query_timeout_s=0), "query_timeout_s"),
    (database(query_timeout_s=301), "query_timeout_s"),
    (database(read_only="sometimes"), "read_only"),
    (database(description="d" * 2001), "description"),
    (database(tables=[]), "tables"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])


# --- PATCH /{id}/tables/{table} ---


async def test_patch_table_hides_and_describes(
    client: httpx.AsyncClient, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    created = await create(client, PATH, database())
    await seed_schema(sessionmaker, created["id"], SCHEMA)
    tables = f"{PATH}/{created['id']}/tables"

    resp = await client.patch(f"{tables}/audit_log", json={"hidden": True})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "name": "audit_log",
        "description": "internal",
        "hidden": True,
        "columns": [],
    }
    resp = await client.patch(f"{tables}/orders", json={"description": "Customer orders"})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["description"], resp.json()["hidden"]) == ("Customer orders", False)
    assert [c["name"] for c in resp.json()["columns"]] == ["id", "total"]

    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    by_name = {t["name"]: t for t in fetched["tables"]}
    assert by_name["audit_log"]["hidden"] is True
    assert by_name["orders"]["description"] == "Customer orders"
    assert by_name["orders"]["columns"][0]["primary_key"] is True


async def test_patch_table_errors(
    client: httpx.AsyncClient, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    created = await create(client, PATH, database())
    tables = f"{PATH}/{created['id']}/tables"
    assert_error(
        await client.patch(f"{tables}/orders", json={"hidden": True}),
        404,
        "NotFound",
        mentions=["orders", "introspect"],
    )
    await seed_schema(sessionmaker, created["id"], SCHEMA)
    assert_error(
        await client.patch(f"{tables}/missing", json={"hidden": True}),
        404,
        "NotFound",
        mentions=["missing", "orders"],
    )
    ghost = f"{PATH}/{uuid.uuid4()}/tables/orders"
    assert_error(await client.patch(ghost, json={"hidden": True}), 404, "NotFound")
    for bad, field in (
        ({"hidden": "yes please"}, "hidden"),
        ({"description": "d" * 2001}, "description"),
        ({"columns": []}, "columns"),
    ):
        assert_error(
            await client.patch(f"{tables}/orders", json=bad), 422, "Invalid", mentions=[field]
        )
    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    assert fetched["tables"] == [
        {**t, "columns": [{**c, "description": None} for c in t["columns"]]} for t in SCHEMA
    ]
