"""Delegation on the embedded SQLite store: a child run beside its parent in one conversation,
its timeout, and the conversation's delete taking both runs along."""

from __future__ import annotations

import pytest

from app.config import Settings
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.storage.test_sqlite_app import _query, embedded, keyring, printed_keys, running

__all__ = ["embedded", "keyring"]  # fixtures used by this module


def _call(agent: str, task: str) -> Turn:
    return Turn(tool_calls=[("p1", "call_agent", {"agent": agent, "task": task})])


async def test_delegation_and_its_timeout_on_sqlite(
    embedded: Settings, scripted_llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = embedded.model_copy(
        update={"llm_base_url": scripted_llm.base_url, "delegation_timeout_s": 1.0}
    )
    async with running(settings):
        pass
    [admin_key] = printed_keys(capsys.readouterr().out)
    async with running(settings, admin_key) as admin:
        helper = (await admin.post("/api/v1/agents", json={"name": "helper"})).json()
        hub = await admin.post(
            "/api/v1/agents", json={"name": "hub", "delegate_ids": [helper["id"]]}
        )
        assert hub.status_code == 201, hub.text
        body = {"agent_id": hub.json()["id"], "message": "hi"}

        scripted_llm.script(_call("helper", "say hi"), Turn(text="hi from helper"), Turn(text="ok"))
        async with admin.stream("POST", "/api/v1/chat", json=body) as resp:
            events = await read_sse(resp)
        assert events[-1].event == "run_finished"
        finished = [e.data for e in events if e.event == "delegation_finished"]
        assert [f["status"] for f in finished] == ["completed"]
        child = finished[0]["child_run_id"]
        conv = events[0].data["conversation_id"]

        # A delegate slower than QUIVER_DELEGATION_TIMEOUT_S is cancelled; the hub goes on.
        scripted_llm.script(
            _call("helper", "take long"), Turn(text="too late", delay_s=3), Turn(text="fine")
        )
        again = {**body, "conversation_id": conv}
        async with admin.stream("POST", "/api/v1/chat", json=again) as resp:
            events = await read_sse(resp)
        assert events[-1].event == "run_finished"
        assert events[-1].data["status"] == "completed"
        slow = [e.data for e in events if e.event == "delegation_finished"]
        assert [f["status"] for f in slow] == ["timeout"]
        [result] = [e.data for e in events if e.event == "tool_result"]
        assert result["error"] == "Agent 'helper' did not answer within 1s; its run was cancelled"
        late = (await admin.get(f"/api/v1/runs/{slow[0]['child_run_id']}")).json()
        assert late["status"] == "cancelled"
        assert late["parent_run_id"] == events[0].data["run_id"]

        rows = _query(settings, "SELECT count(*) FROM runs WHERE parent_run_id IS NOT NULL")
        assert rows[0][0] == 2
        assert (await admin.get(f"/api/v1/runs/{child}")).status_code == 200
        assert (await admin.delete(f"/api/v1/conversations/{conv}")).status_code == 204
        assert _query(settings, "SELECT count(*) FROM runs")[0][0] == 0
