from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.fixtures.crud import (
    assert_error,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    create,
    total,
)

PATH = "/api/v1/api-keys"
ADMIN_ROUTE = "/api/v1/agents"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_create_shows_the_key_once(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "ci", "scopes": ["admin"]})
    key = created["key"]
    assert key.startswith("qv_")
    assert len(key) > 40
    assert created["prefix"] == key[:8]
    assert (created["scopes"], created["revoked_at"], created["last_used_at"]) == (
        ["admin"],
        None,
        None,
    )
    for resp in (await client.get(PATH), await client.get(f"{PATH}/{created['id']}")):
        assert resp.status_code == 200
        assert key not in resp.text
        assert key[8:] not in resp.text
        assert "key_hash" not in resp.text
        assert '"key"' not in resp.text


async def test_the_seeded_admin_token_is_barely_revealed(client: httpx.AsyncClient) -> None:
    [seeded] = (await client.get(PATH)).json()["items"]
    token = client.headers["authorization"].removeprefix("Bearer ")
    assert seeded["scopes"] == ["admin"]
    assert token.startswith(seeded["prefix"])
    assert len(seeded["prefix"]) <= len(token) // 5


async def test_default_scope_is_chat(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "bot"})
    assert created["scopes"] == ["chat"]
    dupes = await create(client, PATH, {"name": "twice", "scopes": ["chat", "chat"]})
    assert dupes["scopes"] == ["chat"]


async def test_created_keys_authenticate_by_scope(
    client: httpx.AsyncClient, anon_client: httpx.AsyncClient
) -> None:
    admin = (await create(client, PATH, {"name": "a", "scopes": ["admin"]}))["key"]
    chat = (await create(client, PATH, {"name": "c", "scopes": ["chat"]}))["key"]
    assert (await anon_client.get(ADMIN_ROUTE, headers=bearer(admin))).status_code == 200
    assert_error(await anon_client.get(ADMIN_ROUTE, headers=bearer(chat)), 403, "Forbidden")


async def test_use_is_recorded(client: httpx.AsyncClient, anon_client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "a", "scopes": ["admin"]})
    await anon_client.get(ADMIN_ROUTE, headers=bearer(created["key"]))
    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    assert fetched["last_used_at"] is not None


async def test_revoke_stops_the_key(
    client: httpx.AsyncClient, anon_client: httpx.AsyncClient
) -> None:
    created = await create(client, PATH, {"name": "leaked", "scopes": ["admin"]})
    key = created["key"]
    assert (await anon_client.get(ADMIN_ROUTE, headers=bearer(key))).status_code == 200

    resp = await client.delete(f"{PATH}/{created['id']}")
    assert resp.status_code == 204
    denied = await anon_client.get(ADMIN_ROUTE, headers=bearer(key))
    assert_error(denied, 401, "Unauthorized")
    assert denied.headers["www-authenticate"] == "Bearer"

    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    assert fetched["revoked_at"] is not None, "revoked keys stay listed"
    again = await client.delete(f"{PATH}/{created['id']}")
    assert again.status_code == 204, "revoking twice is harmless"
    assert (await client.get(f"{PATH}/{created['id']}")).json()["revoked_at"] == fetched[
        "revoked_at"
    ]


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    seeded = await total(client, PATH)
    assert seeded == 1, "the lifespan seeds the QUIVER_ADMIN_TOKEN key"
    await check_pagination(
        client, PATH, [{"name": "k1"}, {"name": "k2"}, {"name": "k3"}], preexisting=seeded
    )


async def test_patch_renames_and_rescopes(
    client: httpx.AsyncClient, anon_client: httpx.AsyncClient
) -> None:
    created = await create(client, PATH, {"name": "bot", "scopes": ["chat"]})
    item = f"{PATH}/{created['id']}"
    resp = await client.patch(item, json={"name": "renamed"})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["name"], resp.json()["scopes"]) == ("renamed", ["chat"])
    resp = await client.patch(item, json={"scopes": ["admin"]})
    assert resp.json()["scopes"] == ["admin"]
    ok = await anon_client.get(ADMIN_ROUTE, headers=bearer(created["key"]))
    assert ok.status_code == 200, "scope changes apply at once"
    for field in ("name", "scopes"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])
    await check_patch_rejected(client, item, {"scopes": []}, mentions=["scopes"])
    await check_patch_rejected(client, item, {"key_hash": "x"}, mentions=["key_hash"])


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({}, "name"),
    ({"name": ""}, "name"),
    ({"name": "n" * 129}, "name"),
    ({"name": 5}, "name"),
    ({"name": "k", "scopes": []}, "scopes"),
    ({"name": "k", "scopes": ["root"]}, "scopes"),
    ({"name": "k", "scopes": "admin"}, "scopes"),
    ({"name": "k", "key": "qv_chosen_by_me"}, "key"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])


async def test_api_keys_need_admin(app: FastAPI, client: httpx.AsyncClient) -> None:
    chat = (await create(client, PATH, {"name": "c", "scopes": ["chat"]}))["key"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://quiver.test", headers=bearer(chat)
    ) as chat_client:
        assert_error(await chat_client.post(PATH, json={"name": "escalate"}), 403, "Forbidden")
        assert_error(await chat_client.get(PATH), 403, "Forbidden")


async def test_agent_ids_and_rate_limit_are_set_patched_and_cleared(
    client: httpx.AsyncClient,
) -> None:
    agent = await create(client, ADMIN_ROUTE, {"name": "limited_agent"})
    created = await create(
        client,
        PATH,
        {"name": "fe", "agent_ids": [agent["id"], agent["id"]], "rate_limit_per_minute": 10},
    )
    assert (created["agent_ids"], created["rate_limit_per_minute"]) == ([agent["id"]], 10)
    path = f"{PATH}/{created['id']}"
    resp = await client.patch(path, json={"agent_ids": None, "rate_limit_per_minute": None})
    assert resp.status_code == 200, resp.text
    assert (resp.json()["agent_ids"], resp.json()["rate_limit_per_minute"]) == (None, None)
    resp = await client.patch(path, json={"agent_ids": []})
    assert resp.json()["agent_ids"] == []
    ghost = "00000000-0000-4000-8000-000000000000"
    assert_error(
        await client.patch(path, json={"agent_ids": [ghost]}), 422, "Invalid", mentions=[ghost]
    )
    assert (await client.get(path)).json()["agent_ids"] == []
    assert_error(
        await client.post(PATH, json={"name": "x", "agent_ids": ["not-a-uuid"]}),
        422,
        "Invalid",
        mentions=["agent_ids"],
    )
