"""Connectors' actions kept across agent reloads (app/connectors/catalog.py) are never stale.

The agent is read again after each write anywhere (`changes.bump`); its actions come from the
process's `ACTIONS` only while the store's `(id, updated_at)` of every action are exactly the
entry's. Each edit below must reach the assembled legacy tools at once; a catalog (or a tool
definition cache) keyed by less, such as the connector alone or its count and newest stamp,
serves the old tools and fails here.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from app.config import Settings
from app.connectors.catalog import ACTIONS
from app.connectors.repository import ConnectorActionRepository
from app.db import changes
from app.main import create_app
from app.pipeline.assemble import assemble_toolset
from app.runtime import Runtime
from tests.conftest import ADMIN_TOKEN

LEGACY = {"connector_tool_mode": "legacy"}


@pytest.fixture
async def quiver(committing_settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """The app on a committing store (its own agent cache and warmer), and its runtime."""
    app = create_app(committing_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app),
            base_url="http://quiver.test",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=60,
        ) as http,
    ):
        yield http, app.state.runtime


def _action(name: str, description: str) -> dict[str, str]:
    return {"name": name, "description": description, "method": "GET", "path": f"/{name}"}


async def test_an_edited_added_or_removed_action_is_never_served_from_memory(
    quiver: tuple[httpx.AsyncClient, Runtime],
) -> None:
    http, runtime = quiver
    name = f"shop_{uuid.uuid4().hex[:8]}"
    body = {
        "name": name,
        "base_url": "https://shop.example.test",
        "actions": [
            _action("list_orders", "List the orders."),
            _action("get_order", "Get one order."),
            _action("refund_order", "Refund an order."),
        ],
    }
    created = await http.post("/api/v1/connectors", json=body)
    assert created.status_code == 201, created.text
    cid = uuid.UUID(created.json()["id"])
    agent = await http.post(
        "/api/v1/agents",
        json={"name": f"a_{name}", "connector_ids": [str(cid)], "model_config_json": LEGACY},
    )
    assert agent.status_code == 201, agent.text
    agent_id = uuid.UUID(agent.json()["id"])

    async def tools() -> dict[str, str]:
        """The agent's legacy connector tools, read again as after any other write."""
        changes.bump()
        loaded = await runtime.agents.get(agent_id)
        assert loaded is not None
        toolset = await assemble_toolset(
            loaded, runtime.settings, runtime.backends, "", select=False
        )
        return {n: t.description for n, t in toolset.full_tools().items() if t.kind == "connector"}

    first = await tools()
    assert first == {
        f"{name}__get_order": "Get one order.",
        f"{name}__list_orders": "List the orders.",
        f"{name}__refund_order": "Refund an order.",
    }
    reads = ACTIONS.reads[cid]
    assert await tools() == first
    assert ACTIONS.reads[cid] == reads, "unchanged actions were read from the store again"

    edited = await http.patch(
        f"/api/v1/connectors/{cid}/actions/get_order", json={"description": "Get an order by id."}
    )
    assert edited.status_code == 200, edited.text
    assert (await tools())[f"{name}__get_order"] == "Get an order by id."

    # Another worker whose clock is behind edits an action: its stamp is older than the
    # newest one, so neither the count nor the newest stamp moves.
    async with runtime.sessionmaker() as session:
        actions, _ = await ConnectorActionRepository(session).page_of(cid, limit=10, offset=0)
        newest = max(a.updated_at for a in actions)
        target = next(a for a in actions if a.name == "list_orders")
        target.description = "List the orders, newest first."
        target.updated_at = newest - timedelta(hours=1)
        await session.commit()
    assert (await tools())[f"{name}__list_orders"] == "List the orders, newest first."

    removed = await http.delete(f"/api/v1/connectors/{cid}/actions/refund_order")
    assert removed.status_code == 204, removed.text
    assert f"{name}__refund_order" not in await tools()

    added = await http.post(
        f"/api/v1/connectors/{cid}/actions", json=_action("cancel_order", "Cancel an order.")
    )
    assert added.status_code == 201, added.text
    assert (await tools())[f"{name}__cancel_order"] == "Cancel an order."
    assert set(await tools()) == {
        f"{name}__cancel_order",
        f"{name}__get_order",
        f"{name}__list_orders",
    }

    deleted = await http.delete(f"/api/v1/connectors/{cid}")
    assert deleted.status_code == 204, deleted.text
    assert await tools() == {}


async def test_a_reimport_replaces_the_remembered_actions(
    quiver: tuple[httpx.AsyncClient, Runtime],
) -> None:
    """The import remembers what it wrote; a re-import that drops and renames operations is
    what the next load serves, not the first import's entry."""
    http, runtime = quiver
    name = f"api_{uuid.uuid4().hex[:8]}"

    def document(*operations: str) -> dict[str, object]:
        return {
            "openapi": "3.0.3",
            "info": {"title": name, "version": "1"},
            "servers": [{"url": "https://api.example.test"}],
            "paths": {
                f"/{op}": {"get": {"operationId": op, "summary": f"The {op} operation."}}
                for op in operations
            },
        }

    imported = await http.post(
        "/api/v1/connectors/import",
        json={"name": name, "document": document("list_pets", "get_pet", "list_owners")},
    )
    assert imported.status_code == 201, imported.text
    cid = uuid.UUID(imported.json()["id"])
    created = await http.post(
        "/api/v1/agents",
        json={"name": f"a_{name}", "connector_ids": [str(cid)], "model_config_json": LEGACY},
    )
    assert created.status_code == 201, created.text
    agent_id = uuid.UUID(created.json()["id"])

    async def names() -> set[str]:
        changes.bump()
        loaded = await runtime.agents.get(agent_id)
        assert loaded is not None
        return {a.name for c in loaded.connectors for a in c.actions}

    assert await names() == {"list_pets", "get_pet", "list_owners"}
    assert ACTIONS.reads[cid] == 0, "the import's actions were read back from the store"

    again = await http.post(
        f"/api/v1/connectors/{cid}/import",
        json={"document": document("list_pets", "get_pet_by_id")},
    )
    assert again.status_code == 200, again.text
    assert await names() == {"list_pets", "get_pet_by_id"}
