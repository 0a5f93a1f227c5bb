"""A legacy catalog's first chat finds its tools ready (issue #33, "large catalogs, cold").

Right after an OpenAPI import the connector's actions and their legacy tool definitions are
in memory (`ActionCatalog.remember`, app/connectors/catalog.py): the first chat reads no action
from the store and builds no definition. After a restart, `/readyz` answers 200 only once the
start-up warm-up has loaded the recent agents' tools and built their rankers
(app/pipeline/warm.py): the first chat then reads and builds nothing either. The counts are the
process's own (`ACTIONS.reads`, `legacy.BUILT`): the live server runs in this process.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from app.connectors.catalog import ACTIONS
from app.db import changes
from app.main import create_app
from app.pipeline.hybrid import HybridRanker
from app.pipeline.ranker import LexicalRanker
from app.pipeline.sources import legacy
from app.tools.cache import DERIVED
from tests.chat.conftest import CreateAgent, live_settings, unique
from tests.chat.test_index_warmup import await_warmed, create_large_connector, index_builds
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.served import await_ready

SPEC = Path(__file__).parents[1] / "connectors" / "specs" / "train_travel_3_1.json"
LEGACY = {"connector_tool_mode": "legacy"}


async def _chat(live: httpx.AsyncClient, agent_id: str, message: str) -> list[str]:
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": message}
    ) as resp:
        assert resp.status_code == 200, await resp.aread()
        events = await read_sse(resp)
    assert events[-1].event == "run_finished", events[-1]
    return [e.event for e in events]


def _offered(llm: ScriptedLLM) -> set[str]:
    return {t["function"]["name"] for t in llm.requests[-1].get("tools", [])}


async def test_the_first_chat_after_an_import_reads_and_builds_no_action(
    live: httpx.AsyncClient, create_agent: CreateAgent, scripted_llm: ScriptedLLM
) -> None:
    name = unique("trains")
    imported = await live.post(
        "/api/v1/connectors/import", json={"name": name, "document": json.loads(SPEC.read_text())}
    )
    assert imported.status_code == 201, imported.text
    cid = uuid.UUID(imported.json()["id"])
    assert legacy.BUILT[cid] == 1, "the import builds the legacy definitions once"
    agent = await create_agent(
        connector_ids=[str(cid)], tool_categories=["connector"], model_config_json=LEGACY
    )
    scripted_llm.script(Turn(text="Two trains leave tonight."))
    await _chat(live, agent["id"], "which trains leave tonight?")
    offered = _offered(scripted_llm)
    assert len(offered) == imported.json()["action_count"]
    assert all(n.startswith(f"{name}__") for n in offered)
    assert ACTIONS.reads[cid] == 0, "the first chat read the imported actions from the store"
    assert legacy.BUILT[cid] == 1, "the first chat built the legacy definitions again"


async def test_after_a_restart_readyz_waits_until_the_agents_tools_are_ready(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    live: httpx.AsyncClient,
    create_agent: CreateAgent,
    scripted_llm: ScriptedLLM,
) -> None:
    created = await create_large_connector(live)
    cid = uuid.UUID(created.json()["id"])
    agent = await create_agent(
        connector_ids=[str(cid)],
        tool_categories=["connector"],
        model_config_json={**LEGACY, "tool_selection_max": 3},
    )
    await await_warmed(live)  # the running app's warm-up of the new agent (else it reads too)
    # A new process, as far as these caches go: the restarted worker below starts empty, and
    # the running app no longer hears its changes (in one process they share the listeners:
    # the restarted worker's listener, coming up, would wake the running app's warmer too,
    # whose read of the emptied actions was a second read, seen in CI).
    monkeypatch.setattr(changes, "_listeners", [])
    for clear in (ACTIONS.clear, DERIVED.clear, HybridRanker.cache_clear):
        clear()
    LexicalRanker.cache_clear()
    legacy.BUILT.clear()

    settings = live_settings(request, request.getfixturevalue("committing_settings"))
    async with (
        serve_app(create_app(settings)) as url,
        httpx.AsyncClient(
            base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        ) as restarted,
    ):
        await await_ready(restarted)
        assert ACTIONS.reads[cid] == 1, "ready before the agent's actions were loaded"
        assert legacy.BUILT[cid] == 1, "ready before the agent's tools were built"
        assert await index_builds(restarted) == 0, "ready before the agent's ranker was built"

        scripted_llm.script(Turn(text="Archived."))
        await _chat(restarted, agent["id"], "archive the coupon of the cedar group")
        offered = _offered(scripted_llm)
        assert any(n.endswith("cedar_archive_coupon") for n in offered), offered
        assert ACTIONS.reads[cid] == 1
        assert legacy.BUILT[cid] == 1
