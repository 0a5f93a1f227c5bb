"""The console's resource forms reach the real back-ends: MCP refresh over stdio
(`mcp-server-time`), database introspection of a SQLite file, hiding a table."""

from __future__ import annotations

import re
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
from app.ui import picker
from tests.conftest import ADMIN_TOKEN
from tests.mcp.servers import TIME_SERVER
from tests.ui.test_session import outcome, page_token, sign_in


@pytest.fixture
async def clients(
    settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """(a signed-in browser-like client, an admin API client) on one app."""
    allowed = settings.model_copy(update={"mcp_stdio_commands": [TIME_SERVER]})
    app = create_app(allowed, sessionmaker=sessionmaker)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://quiver.test", timeout=60) as ui,
        httpx.AsyncClient(
            transport=transport,
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=60,
        ) as api,
    ):
        await sign_in(ui, ADMIN_TOKEN)
        yield ui, api


async def test_mcp_refresh_lists_the_servers_tools(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ui, api = clients
    created = await api.post(
        "/api/v1/mcp-servers", json={"name": "time", "transport": "stdio", "command": TIME_SERVER}
    )
    server_id = created.json()["id"]
    before = await ui.get("/ui/resources")
    # the API lists a new server's tools at create; the console's refresh lists them again
    assert before.text.count('data-testid="mcp-tool"') == len(created.json()["tools"]) >= 1
    assert 'data-testid="mcp-refresh"' in before.text
    done = await ui.post(
        f"/ui/resources/mcp/{server_id}/refresh", data={"csrf_token": page_token(before)}
    )
    kind, text = await outcome(ui, done)
    assert (kind, text.split(":")[0]) == ("notice", "time")
    after = await ui.get("/ui/resources")
    assert after.text.count('data-testid="mcp-tool"') >= 1
    assert "get_current_time" in after.text


async def test_db_introspect_then_hide_a_table(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], tmp_path: Path
) -> None:
    ui, api = clients
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("CREATE TABLE secrets (id INTEGER PRIMARY KEY, token TEXT)")
    created = await api.post("/api/v1/databases", json={"name": "shop", "url": f"sqlite:///{path}"})
    assert created.status_code == 201, created.text
    db_id = created.json()["id"]
    page = await ui.get("/ui/resources")
    assert 'data-testid="db-introspect"' in page.text
    token = page_token(page)
    done = await ui.post(f"/ui/resources/databases/{db_id}/introspect", data={"csrf_token": token})
    assert await outcome(ui, done) == ("notice", "shop: 2 tables")
    listed = await ui.get("/ui/resources")
    assert listed.text.count('data-testid="db-table-row"') == 2
    hide = await ui.post(
        f"/ui/resources/databases/{db_id}/tables/secrets",
        data={"csrf_token": token, "hidden": "true"},
    )
    assert await outcome(ui, hide) == ("notice", "table secrets hidden from the model")
    tables = {t["name"]: t for t in (await api.get(f"/api/v1/databases/{db_id}")).json()["tables"]}
    assert tables["secrets"]["hidden"] is True
    assert tables["customers"]["hidden"] is False
    assert "Show secrets" in (await ui.get("/ui/resources")).text


async def test_the_agent_page_links_delegates_but_not_the_agent_itself(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ui, api = clients
    hub = (await api.post("/api/v1/agents", json={"name": "hub"})).json()
    worker = (await api.post("/api/v1/agents", json={"name": "worker"})).json()
    before = await ui.get(f"/ui/agents/{hub['id']}")
    assert 'data-testid="link-worker"' in before.text
    assert 'data-testid="link-hub"' not in before.text
    done = await ui.post(
        f"/ui/agents/{hub['id']}/links",
        data={"csrf_token": page_token(before), "delegate_ids": [worker["id"]]},
    )
    assert (await outcome(ui, done))[0] == "notice"
    assert (await api.get(f"/api/v1/agents/{hub['id']}")).json()["delegate_ids"] == [worker["id"]]
    after = await ui.get(f"/ui/agents/{hub['id']}")
    assert "call_agent" in after.text, "the preview shows the tool"


async def test_the_preview_form_gets_only_the_preview(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    """htmx's preview request (HX-Target: preview-body) is answered with that part alone: the
    pickers are neither loaded nor sent, and the numbers are the whole page's."""
    ui, api = clients
    agent = (await api.post("/api/v1/agents", json={"name": "previewed"})).json()
    await api.post("/api/v1/agents", json={"name": "bystander"})
    path = f"/ui/agents/{agent['id']}?query=what+time+is+it"
    whole = await ui.get(path)
    part = await ui.get(path, headers={"HX-Request": "true", "HX-Target": "preview-body"})
    assert whole.status_code == part.status_code == 200
    assert 'data-testid="link-bystander"' in whole.text
    assert 'data-testid="link-bystander"' not in part.text
    assert part.text.lstrip().startswith('<div id="preview-body">')
    tokens = 'data-testid="toolset-tokens-progressive">'
    assert whole.text.split(tokens)[1][:12] == part.text.split(tokens)[1][:12]


CHECKED = re.compile(
    r'<input type="checkbox" name="(\w+)" value="([^"]+)" data-testid="link-[^"]*" checked>'
)


def checked_boxes(response: httpx.Response) -> list[tuple[str, str]]:
    """What the linked-resources form sends as the page arrives: its checked boxes."""
    form = response.text.split('data-testid="links-form"')[1].split("</form>")[0]
    return CHECKED.findall(form)


async def test_the_picker_finds_past_its_limit_and_saving_keeps_what_was_not_shown(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the picker's limit at 3, of six agents the page offers the three newest; an older
    one is found by name (htmx's fragment and the plain GET both) and linked, and the save
    keeps an older delegate and a knowledge base that the search never showed."""
    monkeypatch.setattr(picker, "PICK", 3)
    ui, api = clients
    hub = (await api.post("/api/v1/agents", json={"name": "pick_hub"})).json()
    workers = [
        (await api.post("/api/v1/agents", json={"name": f"pick_w{i}"})).json() for i in range(6)
    ]
    ids = {w["name"]: w["id"] for w in workers}
    kb = (await api.post("/api/v1/knowledge-bases", json={"name": "pick_kb"})).json()
    linked = await api.patch(
        f"/api/v1/agents/{hub['id']}",
        json={"delegate_ids": [ids["pick_w0"]], "knowledge_base_ids": [kb["id"]]},
    )
    assert linked.status_code == 200, linked.text

    first = await ui.get(f"/ui/agents/{hub['id']}")
    shown = set(re.findall(r'data-testid="link-(pick_w\d)"', first.text))
    assert shown == {"pick_w0", "pick_w5", "pick_w4", "pick_w3"}, "linked, then the 3 newest"
    assert ("delegate_ids", ids["pick_w0"]) in checked_boxes(first)
    assert 'data-testid="pick-more-delegates"' in first.text
    assert 'data-testid="link-pick_hub"' not in first.text

    # htmx: the fragment with the search and the boxes checked so far (w0 and w4)
    fragment = await ui.get(
        f"/ui/agents/{hub['id']}/links/delegates",
        params={"find_delegates": "W1", "delegate_ids": [ids["pick_w0"], ids["pick_w4"]]},
        headers={"HX-Request": "true", "HX-Target": "pick-delegates"},
    )
    assert fragment.status_code == 200
    found = re.findall(r'data-testid="link-(\w+)"( checked)?', fragment.text)
    assert found == [("pick_w0", " checked"), ("pick_w4", " checked"), ("pick_w1", "")]
    assert "<html" not in fragment.text
    # % and _ match themselves: no name contains "w%1" or "w_"; "_w2" finds one (after the
    # linked w0, unchecked as the browser sent it)
    for text in ("w%1", "w_"):
        none = await ui.get(
            f"/ui/agents/{hub['id']}/links/delegates", params={"find_delegates": text}
        )
        assert 'data-testid="pick-none-delegates"' in none.text, text
        assert re.findall(r'data-testid="link-(\w+)"', none.text) == ["pick_w0"], text
    one = await ui.get(f"/ui/agents/{hub['id']}/links/delegates?find_delegates=_w2")
    found = re.findall(r'data-testid="link-(\w+)"( checked)?', one.text)
    assert found == [("pick_w0", ""), ("pick_w2", "")]

    # without script: the page with find_delegates, then its form as sent plus the found one
    searched = await ui.get(f"/ui/agents/{hub['id']}", params={"find_delegates": "pick_w1"})
    assert 'data-testid="link-pick_w1"' in searched.text
    assert 'data-testid="link-pick_w5"' not in searched.text
    sent = checked_boxes(searched)
    assert set(sent) == {("delegate_ids", ids["pick_w0"]), ("knowledge_base_ids", kb["id"])}
    fields: dict[str, list[str]] = {}
    for name, value in [*sent, ("delegate_ids", ids["pick_w1"])]:
        fields.setdefault(name, []).append(value)
    done = await ui.post(
        f"/ui/agents/{hub['id']}/links", data={"csrf_token": page_token(searched), **fields}
    )
    assert await outcome(ui, done) == ("notice", "linked resources saved")
    saved = (await api.get(f"/api/v1/agents/{hub['id']}")).json()
    assert saved["delegate_ids"] == [ids["pick_w0"], ids["pick_w1"]]
    assert saved["knowledge_base_ids"] == [kb["id"]]


async def test_the_picker_fragment_refuses_bad_input(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    ui, api = clients
    hub = (await api.post("/api/v1/agents", json={"name": "pick_strict"})).json()
    base = f"/ui/agents/{hub['id']}/links"
    unknown = await ui.get(f"{base}/gadgets")
    assert unknown.status_code == 404
    assert "gadgets" in unknown.text
    bad_id = await ui.get(f"{base}/skills", params={"skill_ids": "not-an-id"})
    assert bad_id.status_code == 422
    assert "skill_ids" in bad_id.text
    too_long = await ui.get(f"{base}/skills", params={"find_skills": "x" * 201})
    assert too_long.status_code == 422
    assert "find_skills" in too_long.text
    page_too_long = await ui.get(f"/ui/agents/{hub['id']}", params={"find_skills": "x" * 201})
    assert page_too_long.status_code == 422
    missing = await ui.get(f"/ui/agents/{uuid.uuid4()}/links/skills")
    assert missing.status_code == 404
