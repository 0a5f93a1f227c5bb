from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.fixtures.crud import (
    assert_error,
    check_delete,
    check_duplicates,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    check_slugs,
    check_unknown_ids,
    create,
    total,
)

PATH = "/api/v1/connectors"

GET_ISSUE = {
    "name": "get_issue",
    "description": "Fetch one issue",
    "method": "GET",
    "path": "/repos/{repo}/issues/{number}",
    "parameters": {
        "type": "object",
        "properties": {
            "repo": {"type": "string"},
            "number": {"type": "integer"},
            "verbose": {"type": "boolean", "x-location": "query"},
        },
        "required": ["repo", "number"],
    },
}
CREATE_ISSUE = {
    "name": "create_issue",
    "method": "POST",
    "path": "/issues",
    "parameters": {"type": "object", "properties": {"title": {"type": "string"}}},
    "body_template": {"title": "{title}"},
    "requires_confirmation": True,
}


def connector(name: str = "github", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "GitHub", "base_url": "https://api.github.test", **extra}


async def test_create_returns_201_with_actions(client: httpx.AsyncClient) -> None:
    body = connector(
        auth_type="bearer",
        auth_config={"header_name": "Authorization", "token_prefix": "Bearer"},
        credentials={"token": "tok-create-0001"},
        timeout_s=12.5,
        actions=[GET_ISSUE, CREATE_ISSUE],
    )
    created = await create(client, PATH, body)
    assert created["has_credentials"] is True
    assert "credentials" not in created
    assert created["auth_config"] == {"header_name": "Authorization", "token_prefix": "Bearer"}
    assert created["timeout_s"] == 12.5
    actions = {a["name"]: a for a in created["actions"]}
    assert set(actions) == {"get_issue", "create_issue"}
    assert actions["get_issue"]["parameters"] == GET_ISSUE["parameters"]
    assert actions["create_issue"]["requires_confirmation"] is True
    assert actions["create_issue"]["body_template"] == {"title": "{title}"}
    assert (await client.get(f"{PATH}/{created['id']}")).json() == created


async def test_create_applies_defaults(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector())
    assert created["auth_type"] == "none"
    assert created["auth_config"] == {}
    assert created["has_credentials"] is False
    assert created["actions"] == []


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [connector("c1"), connector("c2"), connector("c3")])


async def test_patch_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector(actions=[GET_ISSUE]))
    resp = await client.patch(f"{PATH}/{created['id']}", json={"description": "new"})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["description"] == "new"
    same = {k for k in created if k not in ("description", "updated_at")}
    assert {k: patched[k] for k in same} == {k: created[k] for k in same}


async def test_patch_auth(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector())
    item = f"{PATH}/{created['id']}"
    await check_patch_rejected(client, item, {"auth_type": "bearer"}, mentions=["credentials"])
    await check_patch_rejected(
        client,
        item,
        {"auth_type": "basic", "credentials": {"username": "u"}},
        mentions=["password"],
    )
    resp = await client.patch(
        item,
        json={"auth_type": "api_key", "credentials": {"api_key": "k-1234"}, "auth_config": {}},
    )
    assert resp.status_code == 200, resp.text
    assert resp.json()["has_credentials"] is True
    resp = await client.patch(item, json={"auth_config": {"query_param": "key"}})
    assert resp.json()["auth_config"] == {"query_param": "key"}
    assert resp.json()["has_credentials"] is True, "credentials stay when not sent"
    await check_patch_rejected(
        client, item, {"auth_type": "none", "credentials": {"api_key": "k"}}, mentions=["none"]
    )
    resp = await client.patch(item, json={"auth_type": "none"})
    assert resp.status_code == 200, resp.text
    assert resp.json()["has_credentials"] is False, "auth_type none drops the credentials"
    await check_patch_rejected(client, item, {"credentials": {"token": "t"}}, mentions=["none"])
    resp = await client.patch(item, json={"credentials": None})
    assert resp.status_code == 200, "clearing absent credentials is fine"


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector())
    item = f"{PATH}/{created['id']}"
    for field in ("name", "base_url", "auth_type", "auth_config", "timeout_s", "description"):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])


async def test_delete_then_404_removes_actions(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector(actions=[GET_ISSUE]))
    await check_delete(client, PATH, created["id"])
    assert_error(await client.get(f"{PATH}/{created['id']}/actions"), 404, "NotFound")


async def test_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    await check_unknown_ids(client, PATH, {"description": "x"})


async def test_names_are_slugs(client: httpx.AsyncClient) -> None:
    await check_slugs(client, PATH, connector)


async def test_duplicate_names_are_409(client: httpx.AsyncClient) -> None:
    await check_duplicates(client, PATH, connector)


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"name": "x"}, "base_url"),
    (connector(base_url="ftp://files.test"), "base_url"),
    (connector(base_url="https://" + "a" * 2048), "base_url"),
    (connector(description="d" * 100_001), "description"),
    (connector(auth_type="oauth"), "auth_type"),
    (connector(auth_config={"header_name": "bad header"}), "header_name"),
    (connector(auth_config={"unknown": "x"}), "unknown"),
    (connector(auth_type="bearer", credentials={}), "token"),
    (connector(auth_type="bearer", credentials={"token": "t", "extra": "x"}), "extra"),
    (connector(auth_type="bearer", credentials={"token": 5}), "credentials"),
    (connector(timeout_s=0), "timeout_s"),
    (connector(timeout_s=301), "timeout_s"),
    (connector(actions=[GET_ISSUE, GET_ISSUE]), "duplicate action names"),
    (connector(actions=[{**GET_ISSUE, "parameters": {}}]), "{repo}"),
    (connector(actions=[{**GET_ISSUE, "name": "Bad-Name"}]), "name"),
    (connector(actions=[{**GET_ISSUE, "method": "FETCH"}]), "method"),
    (connector(actions=[{**GET_ISSUE, "path": "no-slash"}]), "path"),
    (connector(actions=[{**GET_ISSUE, "parameters": {"type": "array"}}]), "parameters"),
    (
        connector(
            actions=[
                {
                    "name": "a",
                    "parameters": {
                        "type": "object",
                        "properties": {"q": {"type": "string", "x-location": "cookie"}},
                    },
                }
            ]
        ),
        "x-location",
    ),
    (connector(actions=[{"name": "a", "parameters": {"type": 12}}]), "JSON Schema"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for body, field in BAD_INPUT:
        with subtests.test(field=field, body=str(body)[:80]):
            await check_rejected(client, PATH, body, mentions=[field])


# --- actions sub-resource ---


async def test_actions_crud(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector(actions=[GET_ISSUE]))
    actions = f"{PATH}/{created['id']}/actions"

    added = await client.post(actions, json=CREATE_ISSUE)
    assert added.status_code == 201, added.text
    assert added.json()["name"] == "create_issue"
    listed = (await client.get(actions)).json()
    assert [a["name"] for a in listed["items"]] == ["create_issue", "get_issue"]
    assert (await client.get(f"{actions}/get_issue")).json()["path"] == GET_ISSUE["path"]
    connector_view = (await client.get(f"{PATH}/{created['id']}")).json()
    assert {a["name"] for a in connector_view["actions"]} == {"create_issue", "get_issue"}

    resp = await client.patch(f"{actions}/get_issue", json={"description": "one issue"})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["description"] == "one issue"
    assert (patched["method"], patched["path"]) == ("GET", GET_ISSUE["path"])
    assert patched["parameters"] == GET_ISSUE["parameters"]

    renamed = await client.patch(f"{actions}/get_issue", json={"name": "fetch_issue"})
    assert renamed.status_code == 200, renamed.text
    assert_error(await client.get(f"{actions}/get_issue"), 404, "NotFound")

    resp = await client.delete(f"{actions}/fetch_issue")
    assert resp.status_code == 204
    assert_error(await client.get(f"{actions}/fetch_issue"), 404, "NotFound")
    assert_error(await client.delete(f"{actions}/fetch_issue"), 404, "NotFound")
    assert [a["name"] for a in (await client.get(actions)).json()["items"]] == ["create_issue"]


async def test_action_errors(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, connector(actions=[GET_ISSUE, CREATE_ISSUE]))
    actions = f"{PATH}/{created['id']}/actions"
    before = (await client.get(actions)).json()

    assert_error(
        await client.post(actions, json=GET_ISSUE), 409, "Conflict", mentions=["get_issue"]
    )
    for bad in (
        {"name": "Bad-Name"},
        {"name": "x", "path": "/items/{id}"},
        {"name": "x", "method": "BREW"},
        {"path": "/"},
    ):
        assert_error(await client.post(actions, json=bad), 422, "Invalid")
    await check_patch_rejected(
        client, f"{actions}/get_issue", {"name": "create_issue"}, status=409, kind="Conflict"
    )
    await check_patch_rejected(client, f"{actions}/get_issue", {"path": "/x/{other}"})
    await check_patch_rejected(
        client, f"{actions}/get_issue", {"parameters": None}, mentions=["parameters"]
    )
    await check_patch_rejected(client, f"{actions}/get_issue", {"method": "BREW"})
    assert_error(await client.get(f"{actions}/nope"), 404, "NotFound", mentions=["nope"])
    assert_error(await client.patch(f"{actions}/nope", json={}), 404, "NotFound")
    assert (await client.get(actions)).json() == before


async def test_actions_of_unknown_connector_are_404(client: httpx.AsyncClient) -> None:
    ghost = f"{PATH}/{uuid.uuid4()}/actions"
    assert_error(await client.get(ghost), 404, "NotFound")
    assert_error(await client.post(ghost, json=CREATE_ISSUE), 404, "NotFound")
    assert_error(await client.get(f"{ghost}/get_issue"), 404, "NotFound")
    assert_error(await client.patch(f"{ghost}/get_issue", json={}), 404, "NotFound")
    assert_error(await client.delete(f"{ghost}/get_issue"), 404, "NotFound")
    assert await total(client, PATH) == 0


# --- lists stay small ---


def _numbered_action(i: int) -> dict[str, Any]:
    return {"name": f"op_{i:04d}", "method": "GET", "path": f"/items/{i}"}


async def test_connector_list_counts_actions_instead_of_embedding_them(
    client: httpx.AsyncClient,
) -> None:
    big = await create(
        client, PATH, connector("big", actions=[_numbered_action(i) for i in range(300)])
    )
    await create(client, PATH, connector("small", actions=[GET_ISSUE]))
    resp = await client.get(PATH, params={"limit": 5})
    assert resp.status_code == 200, resp.text
    items = {c["name"]: c for c in resp.json()["items"]}
    assert {n: c["action_count"] for n, c in items.items()} == {"big": 300, "small": 1}
    assert all("actions" not in c for c in items.values())
    assert len(resp.content) < 5_000
    one = (await client.get(f"{PATH}/{big['id']}")).json()
    assert one["action_count"] == 300
    assert len(one["actions"]) == 300


async def test_actions_are_paginated(client: httpx.AsyncClient) -> None:
    created = await create(
        client, PATH, connector(actions=[_numbered_action(i) for i in range(250)])
    )
    actions = f"{PATH}/{created['id']}/actions"
    first = (await client.get(actions, params={"limit": 2})).json()
    assert [a["name"] for a in first["items"]] == ["op_0000", "op_0001"]
    assert (first["total"], first["limit"], first["offset"]) == (250, 2, 0)
    later = (await client.get(actions, params={"limit": 3, "offset": 248})).json()
    assert [a["name"] for a in later["items"]] == ["op_0248", "op_0249"]
    default = (await client.get(actions)).json()
    assert len(default["items"]) == 50
    assert default["total"] == 250
    assert_error(await client.get(actions, params={"limit": 201}), 422, "Invalid")
