from __future__ import annotations

import httpx


async def test_healthz_and_readyz_are_open(anon_client: httpx.AsyncClient) -> None:
    assert (await anon_client.get("/healthz")).json() == {"status": "ok"}
    assert (await anon_client.get("/readyz")).json() == {"status": "ready"}


async def test_skill_crud_round_trip(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/v1/skills", json={"name": "triage", "description": "d", "content": "c"}
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert (await client.get(f"/api/v1/skills/{sid}")).json()["name"] == "triage"
    dup = await client.post("/api/v1/skills", json={"name": "triage", "content": "c"})
    assert dup.status_code == 409
    assert dup.json()["error"] == "Conflict"
    listed = (await client.get("/api/v1/skills")).json()
    assert listed["total"] == 1
