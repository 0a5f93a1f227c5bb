"""Introspection, table flags and the admin query route, through HTTP, on a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx


def _seed(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);
        CREATE TABLE salaries (id INTEGER PRIMARY KEY, customer_id INTEGER, amount REAL);
        INSERT INTO customers (name, email) VALUES ('Ada', 'ada@example.com'), ('Linus', NULL);
        INSERT INTO salaries (customer_id, amount) VALUES (1, 100.5);
        """
    )
    conn.commit()
    conn.close()


async def test_introspect_hide_and_query(client: httpx.AsyncClient, tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    _seed(path)
    created = await client.post(
        "/api/v1/databases", json={"name": "shop", "url": f"sqlite:///{path}"}
    )
    assert created.status_code == 201, created.text
    db = created.json()
    assert db["dialect"] == "sqlite"
    assert db["tables"] == []

    introspected = await client.post(f"/api/v1/databases/{db['id']}/introspect")
    assert introspected.status_code == 200, introspected.text
    tables = {t["name"]: t for t in introspected.json()["tables"]}
    assert set(tables) == {"customers", "salaries"}
    columns = {c["name"]: c for c in tables["customers"]["columns"]}
    assert columns["id"]["primary_key"] is True
    assert columns["name"]["nullable"] is False

    hidden = await client.patch(
        f"/api/v1/databases/{db['id']}/tables/salaries",
        json={"hidden": True, "description": "payroll"},
    )
    assert hidden.status_code == 200
    assert hidden.json()["hidden"] is True
    # a second introspection keeps the admin's flags
    again = await client.post(f"/api/v1/databases/{db['id']}/introspect")
    kept = {t["name"]: t for t in again.json()["tables"]}["salaries"]
    assert kept["hidden"] is True
    assert kept["description"] == "payroll"

    ok = await client.post(
        f"/api/v1/databases/{db['id']}/query",
        json={"sql": "SELECT name FROM customers ORDER BY id"},
    )
    assert ok.status_code == 200
    assert ok.json()["ok"] is True
    assert "Ada" in ok.json()["output"]

    refused = await client.post(
        f"/api/v1/databases/{db['id']}/query", json={"sql": "SELECT * FROM salaries"}
    )
    assert refused.json()["ok"] is False
    assert refused.json()["error"].startswith("[SQL Safety Error]")

    write = await client.post(
        f"/api/v1/databases/{db['id']}/query", json={"sql": "DELETE FROM customers"}
    )
    assert write.json()["ok"] is False
    assert write.json()["error"].startswith("[SQL Safety Error]")
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM customers").fetchone()[0] == 2
    conn.close()

    unknown = await client.patch(f"/api/v1/databases/{db['id']}/tables/nope", json={"hidden": True})
    assert unknown.status_code == 404
    assert "customers" in unknown.json()["detail"]
