"""The console's resource forms reach the real back-ends: MCP refresh over stdio
(`mcp-server-time`), database introspection of a SQLite file, hiding a table."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.main import create_app
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
