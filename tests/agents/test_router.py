from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.fixtures.crud import (
    check_delete,
    check_pagination,
    check_patch_rejected,
    check_rejected,
    create,
)

PATH = "/api/v1/agents"
LINK_FIELDS = ("connector_ids", "database_ids", "mcp_server_ids", "skill_ids", "delegate_ids")


def agent(name: str = "helper", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": "Helps", "instructions": "Be brief.", **extra}


async def make_resources(client: httpx.AsyncClient, suffix: str = "a") -> dict[str, str]:
    """One linked resource of each kind; returns `{link_field: id}`."""
    connector = await create(
        client, "/api/v1/connectors", {"name": f"api_{suffix}", "base_url": "https://api.test"}
    )
    database = await create(
        client, "/api/v1/databases", {"name": f"db_{suffix}", "url": "sqlite:///x.db"}
    )
    server = await create(
        client,
        "/api/v1/mcp-servers",
        {"name": f"mcp_{suffix}", "transport": "streamable_http", "url": "https://mcp.test/mcp"},
    )
    skill = await create(client, "/api/v1/skills", {"name": f"skill_{suffix}", "content": "x"})
    delegate = await create(client, PATH, agent(f"delegate_{suffix}"))
    return {
        "connector_ids": connector["id"],
        "database_ids": database["id"],
        "mcp_server_ids": server["id"],
        "skill_ids": skill["id"],
        "delegate_ids": delegate["id"],
    }


async def test_create_returns_201_and_get_returns_links(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    config = {"max_iterations": 5, "tool_profile": {"include": ["github.*"]}}
    body = agent(
        model="gpt-4o",
        model_config_json=config,
        tool_categories=["skill", "mcp"],
        **{field: [rid] for field, rid in links.items()},
    )
    created = await create(client, PATH, body)
    for field, rid in links.items():
        assert created[field] == [rid]
    assert created["model_config_json"] == config, "stored as sent (defaults stay defaults)"
    assert created["tool_categories"] == ["skill", "mcp"]
    fetched = (await client.get(f"{PATH}/{created['id']}")).json()
    assert fetched == created


async def test_create_applies_defaults(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, {"name": "bare"})
    assert created["model"] is None
    assert created["model_config_json"] == {}
    assert created["tool_categories"] is None
    assert all(created[field] == [] for field in LINK_FIELDS)


async def test_list_is_paginated(client: httpx.AsyncClient) -> None:
    await check_pagination(client, PATH, [agent("a1"), agent("a2"), agent("a3")])


async def test_list_items_carry_links(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    created = await create(
        client, PATH, agent(skill_ids=[links["skill_ids"]], delegate_ids=[links["delegate_ids"]])
    )
    items = {i["id"]: i for i in (await client.get(PATH)).json()["items"]}
    assert set(items) == {created["id"], links["delegate_ids"]}
    item = items[created["id"]]
    assert item["skill_ids"] == [links["skill_ids"]]
    assert item["delegate_ids"] == [links["delegate_ids"]]


async def test_patch_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    created = await create(client, PATH, agent(skill_ids=[links["skill_ids"]], model="m1"))
    resp = await client.patch(f"{PATH}/{created['id']}", json={"instructions": "Be kind."})
    assert resp.status_code == 200, resp.text
    patched = resp.json()
    assert patched["instructions"] == "Be kind."
    unchanged = {k for k in created if k not in ("instructions", "updated_at")}
    assert {k: patched[k] for k in unchanged} == {k: created[k] for k in unchanged}


async def test_patch_links_replace_the_full_list(client: httpx.AsyncClient) -> None:
    first = await make_resources(client, "a")
    second = await make_resources(client, "b")
    created = await create(client, PATH, agent(**{f: [rid] for f, rid in first.items()}))
    item = f"{PATH}/{created['id']}"

    resp = await client.patch(item, json={"skill_ids": [second["skill_ids"], first["skill_ids"]]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["skill_ids"] == [second["skill_ids"], first["skill_ids"]]
    assert resp.json()["connector_ids"] == [first["connector_ids"]], "unsent lists stay"

    resp = await client.patch(item, json={"connector_ids": [], "database_ids": []})
    fetched = (await client.get(item)).json()
    assert resp.json() == fetched
    assert fetched["connector_ids"] == []
    assert fetched["database_ids"] == []
    assert fetched["mcp_server_ids"] == [first["mcp_server_ids"]]


async def test_duplicate_ids_in_a_link_list_are_stored_once(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    sid = links["skill_ids"]
    created = await create(client, PATH, agent(skill_ids=[sid, sid]))
    assert created["skill_ids"] == [sid]


async def test_patch_explicit_null(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, agent(model="m1", tool_categories=["skill"]))
    item = f"{PATH}/{created['id']}"
    for field in ("name", "description", "instructions", "model_config_json", *LINK_FIELDS):
        await check_patch_rejected(client, item, {field: None}, mentions=[field])
    cleared = await client.patch(item, json={"model": None, "tool_categories": None})
    assert cleared.status_code == 200, cleared.text
    assert (cleared.json()["model"], cleared.json()["tool_categories"]) == (None, None)


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    created = await create(client, PATH, agent(**{f: [rid] for f, rid in links.items()}))
    await check_delete(client, PATH, created["id"])
    skill = await client.get(f"/api/v1/skills/{links['skill_ids']}")
    assert skill.status_code == 200, "deleting an agent keeps the resources it linked"


BAD_INPUT: list[tuple[dict[str, Any], str]] = [
    ({"name": None}, "name"),
    ({"name": 7}, "name"),
    ({"description": "d" * 2001}, "description"),
    ({"instructions": "i" * 200_001}, "instructions"),
    ({"model": ""}, "model"),
    ({"model": "m" * 129}, "model"),
    ({"tool_categories": ["telepathy"]}, "tool_categories"),
    ({"tool_categories": "skill"}, "tool_categories"),
    ({"connector_ids": ["not-a-uuid"]}, "connector_ids"),
    ({"skill_ids": "abc"}, "skill_ids"),
    ({"model_config_json": []}, "model_config_json"),
    ({"model_config_json": {"bogus_key": 1}}, "bogus_key"),
    ({"model_config_json": {"max_iterations": 0}}, "max_iterations"),
    ({"model_config_json": {"max_iterations": "many"}}, "max_iterations"),
    ({"model_config_json": {"skill_tool_mode": "legacy"}}, "skill_tool_mode"),
    ({"model_config_json": {"tool_profile": {"nope": 1}}}, "tool_profile.nope"),
    (
        {"model_config_json": {"step_iteration": {"similarity_threshold": 2}}},
        "step_iteration.similarity_threshold",
    ),
    (
        {
            "model_config_json": {
                "pre_hydration": {"custom_patterns": [{"ref_type": "t", "pattern": "(["}]}
            }
        },
        "pre_hydration.custom_patterns.0.pattern",
    ),
    ({"unexpected": True}, "unexpected"),
]
"""(body, field the 422 must name)"""


async def test_bad_input_is_422_and_writes_nothing(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    for extra, field in BAD_INPUT:
        with subtests.test(field=field, extra=str(extra)[:80]):
            await check_rejected(client, PATH, agent(**extra), mentions=[field])


async def test_missing_name_is_422(client: httpx.AsyncClient) -> None:
    await check_rejected(client, PATH, {"description": "no name"}, mentions=["name"])


async def test_unknown_link_ids_are_422_naming_the_field(
    client: httpx.AsyncClient, subtests: pytest.Subtests
) -> None:
    links = await make_resources(client)
    ghost = str(uuid.uuid4())
    for field in LINK_FIELDS:
        with subtests.test(field=field):
            await check_rejected(
                client, PATH, agent(**{field: [links[field], ghost]}), mentions=[field, ghost]
            )
            created = await create(client, PATH, agent(f"with_{field}", **{field: [links[field]]}))
            await check_patch_rejected(
                client, f"{PATH}/{created['id']}", {field: [ghost]}, mentions=[field, ghost]
            )


async def test_invalid_config_on_patch_is_422_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    created = await create(client, PATH, agent(model_config_json={"max_iterations": 3}))
    item = f"{PATH}/{created['id']}"
    await check_patch_rejected(
        client,
        item,
        {"description": "new", "model_config_json": {"max_iterations": 0}},
        mentions=["max_iterations"],
    )
    await check_patch_rejected(
        client,
        item,
        {"description": "new", "skill_ids": [str(uuid.uuid4())]},
        mentions=["skill_ids"],
    )


async def test_deleting_a_linked_resource_removes_the_link(client: httpx.AsyncClient) -> None:
    links = await make_resources(client)
    created = await create(client, PATH, agent(**{f: [rid] for f, rid in links.items()}))
    paths = {
        "connector_ids": "/api/v1/connectors",
        "database_ids": "/api/v1/databases",
        "mcp_server_ids": "/api/v1/mcp-servers",
        "skill_ids": "/api/v1/skills",
        "delegate_ids": PATH,
    }
    for field, rid in links.items():
        assert (await client.delete(f"{paths[field]}/{rid}")).status_code == 204
        fetched = (await client.get(f"{PATH}/{created['id']}")).json()
        assert fetched[field] == [], field
    assert all(fetched[f] == [] for f in LINK_FIELDS)


async def test_an_agent_may_not_delegate_to_itself(client: httpx.AsyncClient) -> None:
    created = await create(client, PATH, agent("hub"))
    item = f"{PATH}/{created['id']}"
    await check_patch_rejected(
        client, item, {"delegate_ids": [created["id"]]}, mentions=["delegate_ids", "itself"]
    )
    other = await create(client, PATH, agent("worker"))
    resp = await client.patch(item, json={"delegate_ids": [other["id"]]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["delegate_ids"] == [other["id"]]
    # Each may name the other: a cycle is refused when a run would follow it, not on write.
    back = await client.patch(f"{PATH}/{other['id']}", json={"delegate_ids": [created["id"]]})
    assert back.status_code == 200, back.text
    assert (await client.delete(item)).status_code == 204
    assert (await client.get(f"{PATH}/{other['id']}")).json()["delegate_ids"] == []
