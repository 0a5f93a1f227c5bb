"""The keys page's and the playground's agent selects search by name (ASGI, no browser).

The picker's limit is lowered (`picker.PICK`) rather than creating a thousand agents: an agent
past it is found by name, a chat key restricted to some agents finds only those, and the
agents chosen so far stay selected."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.ui import picker
from tests.conftest import ADMIN_TOKEN
from tests.ui.test_session import page_token, sign_in

OPTION = re.compile(r'<option value="([^"]*)"( selected)?( disabled)?[^>]*>([^<]*)</option>')


@pytest.fixture
async def browser(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://quiver.test"
    ) as c:
        yield c


def options(text: str, select_id: str) -> list[tuple[str, bool]]:
    """(name, selected) of a select's enabled options, or of a fragment's."""
    if f'<select id="{select_id}"' in text:
        text = text.split(f'<select id="{select_id}"')[1].split("</select>")[0]
    return [(name, bool(sel)) for _, sel, off, name in OPTION.findall(text) if not off]


async def agents(client: httpx.AsyncClient, *names: str) -> dict[str, str]:
    made = {}
    for name in names:
        created = await client.post("/api/v1/agents", json={"name": name})
        assert created.status_code == 201, created.text
        made[name] = created.json()["id"]
    return made


async def test_a_new_key_gets_an_agent_past_the_limit_by_name(
    browser: httpx.AsyncClient, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(picker, "PICK", 2)
    ids = await agents(client, "desk_a", "desk_b", "desk_c", "desk_d")
    await sign_in(browser, ADMIN_TOKEN)
    first = await browser.get("/ui/keys")
    assert options(first.text, "key-agents") == [("desk_d", False), ("desk_c", False)]
    assert 'data-testid="agents-more"' in first.text
    # htmx: the search with the agents selected so far, which stay first and selected
    fragment = await browser.get(
        "/ui/keys/agents", params={"find_agents": "SK_A", "agent_ids": [ids["desk_c"]]}
    )
    assert options(fragment.text, "key-agents") == [("desk_c", True), ("desk_a", False)]
    # without script: the page with find_agents, then the form with the agent found
    searched = await browser.get("/ui/keys", params={"find_agents": "desk_a"})
    assert options(searched.text, "key-agents") == [("desk_a", False)]
    made = await browser.post(
        "/ui/keys",
        data={
            "csrf_token": page_token(searched),
            "name": "desk-a-only",
            "scopes": ["chat"],
            "agent_ids": [ids["desk_a"]],
        },
    )
    assert made.status_code == 200, made.text
    row = made.text.split('data-key-name="desk-a-only"')[1].split("</tr>")[0]
    assert "<td>desk_a</td>" in row, "the keys table names the key's agent"
    listed = (await client.get("/api/v1/api-keys")).json()["items"]
    assert [k["agent_ids"] for k in listed if k["name"] == "desk-a-only"] == [[ids["desk_a"]]]


async def test_the_playground_finds_only_the_agents_a_key_may_use(
    browser: httpx.AsyncClient, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(picker, "PICK", 2)
    ids = await agents(client, "room_a", "room_b", "room_c", "room_d", "room_e")
    allowed = [ids["room_a"], ids["room_b"], ids["room_d"]]
    created = await client.post(
        "/api/v1/api-keys", json={"name": "rooms", "scopes": ["chat"], "agent_ids": allowed}
    )
    assert created.status_code == 201, created.text
    await sign_in(browser, created.json()["key"])
    first = await browser.get("/ui/playground")
    assert options(first.text, "chat-agent") == [("room_d", False), ("room_b", False)]
    found = await browser.get("/ui/playground/agents", params={"find_agents": "room_"})
    assert options(found.text, "chat-agent") == [("room_a", False), ("room_b", False)]
    assert 'data-testid="agents-more"' in found.text
    chosen = await browser.get(
        "/ui/playground/agents", params={"find_agents": "_a", "agent_id": ids["room_d"]}
    )
    assert options(chosen.text, "chat-agent") == [("room_d", True), ("room_a", False)]
    # an agent the key may not use is neither found nor kept
    refused = await browser.get(
        "/ui/playground/agents", params={"find_agents": "room_c", "agent_id": ids["room_e"]}
    )
    assert options(refused.text, "chat-agent") == []
    assert 'data-testid="agents-none"' in refused.text
    linked = await browser.get("/ui/playground", params={"agent": ids["room_a"]})
    assert options(linked.text, "chat-agent")[0] == ("room_a", True)
    bad = await browser.get("/ui/playground", params={"agent": "nope"})
    assert bad.status_code == 422
    assert (await browser.get("/ui/keys/agents")).status_code == 403, "admin only"
