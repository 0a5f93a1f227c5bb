"""What schemathesis found about the HTTP surface: a 405 names the allowed methods, a
collection's own route (`/import`) is no item id, and every status a route answers is
declared."""

from __future__ import annotations

import httpx
import pytest

NO_SUCH_ID = "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/api/v1/chat", {"POST"}),
        ("TRACE", f"/api/v1/agents/{NO_SUCH_ID}", {"GET", "PATCH", "DELETE"}),
        ("PUT", "/api/v1/agents", {"GET", "POST"}),
        ("PATCH", "/api/v1/connectors/import", {"POST"}),
        ("PATCH", "/api/v1/skills/import", {"POST"}),
        ("DELETE", "/api/v1/skills/import", {"POST"}),
        ("GET", "/api/v1/connectors/import", {"POST"}),
        ("POST", "/healthz", {"GET"}),
    ],
)
async def test_a_method_a_route_does_not_have_is_405_naming_those_it_has(
    client: httpx.AsyncClient, method: str, path: str, allowed: set[str]
) -> None:
    answer = await client.request(method, path)
    assert answer.status_code == 405, answer.text
    assert answer.json()["error"] == "MethodNotAllowed"
    assert {m.strip() for m in answer.headers["allow"].split(",")} - {"HEAD"} == allowed


async def test_a_malformed_item_id_is_still_a_422(client: httpx.AsyncClient) -> None:
    answer = await client.get("/api/v1/connectors/not-a-uuid")
    assert answer.status_code == 422
    assert "id" in answer.json()["detail"]


async def test_introspection_declares_its_upstream_failure(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    responses = doc["paths"]["/api/v1/databases/{id}/introspect"]["post"]["responses"]
    assert "502" in responses
    assert "{id}" in "".join(doc["paths"])  # the item convertor is not in the document
    assert not [p for p in doc["paths"] if ":" in p]


async def test_an_unreachable_database_answers_the_declared_502(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/v1/databases",
        json={"name": "gone_db", "url": "postgresql://postgres@127.0.0.1:1/nothing"},
    )
    assert created.status_code == 201, created.text
    answer = await client.post(f"/api/v1/databases/{created.json()['id']}/introspect")
    assert answer.status_code == 502, answer.text
    assert set(answer.json()) == {"error", "detail"}
