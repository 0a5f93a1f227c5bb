"""Connector import and the admin test route, through HTTP, against a real local server."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.connectors.server_app import LocalServer

SPECS = Path(__file__).parent / "specs"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def loopback_client(committing_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """Its own engine (committing): the audit sink writes concurrently with requests."""
    open_settings = committing_settings.model_copy(update={"egress_allow_cidrs": ["127.0.0.0/8"]})
    app = create_app(open_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        ) as client,
    ):
        yield client


async def test_import_petstore_yaml_then_call_an_action(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    document = (SPECS / "petstore3.yaml").read_text()
    resp = await loopback_client.post(
        "/api/v1/connectors/import",
        json={
            "document": document,
            "name": unique("petstore"),
            "base_url": server.url,
            "credentials": {"token": "pet-token-1234"},
        },
    )
    assert resp.status_code == 201, resp.text
    body = resp.json()
    names = {a["name"] for a in body["actions"]}
    assert "get_pet_by_id" in names
    assert isinstance(body["warnings"], list)
    result = await loopback_client.post(
        f"/api/v1/connectors/{body['id']}/actions/get_pet_by_id/test",
        json={"parameters": {"petId": 7}},
    )
    assert result.status_code == 200, result.text
    outcome = result.json()
    assert outcome["ok"] is True, outcome
    assert outcome["elapsed_ms"] > 0
    assert server.last["path"].endswith("/pet/7")
    assert server.last["headers"]["authorization"] == "Bearer pet-token-1234"


async def test_import_json_object_document(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    document = json.loads((SPECS / "train_travel_3_1.json").read_text())
    resp = await loopback_client.post(
        "/api/v1/connectors/import",
        json={"document": document, "name": unique("trains"), "base_url": server.url},
    )
    assert resp.status_code == 201, resp.text
    assert len(resp.json()["actions"]) >= 3


async def test_bad_document_is_422_with_a_pointer_and_writes_nothing(
    loopback_client: httpx.AsyncClient,
) -> None:
    before = (await loopback_client.get("/api/v1/connectors")).json()["total"]
    resp = await loopback_client.post(
        "/api/v1/connectors/import",
        json={
            "document": {
                "openapi": "3.0.3",
                "info": {"title": "x", "version": "1"},
                "paths": {"/pets": {"get": {"responses": []}}},
            },
            "name": unique("broken"),
            "base_url": "https://api.example.com",
        },
    )
    assert resp.status_code == 422
    assert resp.json()["error"] == "Invalid"
    assert "/paths/~1pets/get/responses" in resp.json()["detail"]
    after = (await loopback_client.get("/api/v1/connectors")).json()["total"]
    assert before == after


async def test_action_test_route_validates_and_hides_credentials(
    loopback_client: httpx.AsyncClient, server: LocalServer
) -> None:
    created = await loopback_client.post(
        "/api/v1/connectors",
        json={
            "name": unique("echo"),
            "base_url": server.url,
            "auth_type": "bearer",
            "credentials": {"token": "tok-SECRET-123456"},
            "actions": [
                {
                    "name": "get_item",
                    "method": "GET",
                    "path": "/things/{id}",
                    "parameters": {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}},
                        "required": ["id"],
                    },
                }
            ],
        },
    )
    assert created.status_code == 201, created.text
    cid = created.json()["id"]
    ok = await loopback_client.post(
        f"/api/v1/connectors/{cid}/actions/get_item/test", json={"parameters": {"id": 3}}
    )
    assert ok.json()["ok"] is True
    assert server.last["headers"]["authorization"] == "Bearer tok-SECRET-123456"
    assert "tok-SECRET-123456" not in ok.text
    bad = await loopback_client.post(
        f"/api/v1/connectors/{cid}/actions/get_item/test", json={"parameters": {"id": "x"}}
    )
    assert bad.status_code == 200
    assert bad.json()["ok"] is False
    assert "id" in bad.json()["error"]
    missing = await loopback_client.post(
        f"/api/v1/connectors/{cid}/actions/nope/test", json={"parameters": {}}
    )
    assert missing.status_code == 404
    assert "get_item" in missing.json()["detail"]
