"""`call_agent` through the MCP endpoint: the session's run is the parent of the child run."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.mcpserver.test_endpoint import connect, post, text, unique


@pytest.fixture(scope="module")
async def live_url(
    committing_settings: Settings, scripted_llm_session: ScriptedLLM
) -> AsyncIterator[str]:
    settings = committing_settings.model_copy(
        update={"llm_base_url": scripted_llm_session.base_url}
    )
    async with serve_app(create_app(settings)) as base_url:
        yield base_url


async def test_an_mcp_client_delegates_and_reads_only_the_answer(
    live_url: str, scripted_llm: ScriptedLLM
) -> None:
    async with httpx.AsyncClient(
        base_url=live_url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
    ) as admin:
        helper = await post(
            admin,
            "agents",
            {"name": unique("helper"), "description": "Sums numbers.", "instructions": "HIDDEN"},
        )
        hub = await post(admin, "agents", {"name": unique("hub"), "delegate_ids": [helper["id"]]})
        scripted_llm.script(Turn(text="2 + 2 = 4"))
        async with connect(live_url, hub["name"]) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert f"- {helper['name']}: Sums numbers." in (listed["call_agent"].description or "")
            result = await client.call_tool(
                "call_agent", {"agent": helper["name"], "task": "add 2 and 2"}
            )
            assert not result.is_error, text(result)
            assert text(result) == "2 + 2 = 4"
        assert scripted_llm.requests[0]["messages"][0]["content"].startswith("HIDDEN")

        sessions = (await admin.get("/api/v1/runs", params={"agent_id": hub["id"]})).json()
        [session_run] = sessions["items"]
        children = (await admin.get("/api/v1/runs", params={"agent_id": helper["id"]})).json()
        [child] = children["items"]
        assert child["parent_run_id"] == session_run["id"]
        assert child["status"] == "completed"
        async with admin.stream("GET", f"/api/v1/runs/{session_run['id']}/events") as resp:
            kinds = [e.event for e in await read_sse(resp)]
        assert kinds.index("delegation_started") < kinds.index("delegation_finished")
