from __future__ import annotations

import httpx

from tests.chat.conftest import CreateAgent, unique
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


async def test_run_reads_a_skill_then_answers(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    skill = (
        await live.post(
            "/api/v1/skills",
            json={
                "name": unique("triage"),
                "description": "How to triage bugs",
                "content": "Step 1: label it.",
            },
        )
    ).json()
    agent = await create_agent(skill_ids=[skill["id"]])
    scripted_llm.script(
        Turn(tool_calls=[("call_1", "read_skill", {"name": skill["name"]})]),
        Turn(text="Label it first."),
    )
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "how do I triage?"}
    ) as resp:
        assert resp.status_code == 200
        events = await read_sse(resp)
    kinds = [e.event for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    result = next(e for e in events if e.event == "tool_result")
    assert result.data["ok"] is True
    assert "Step 1: label it." in result.data["output"]
    assert events[-2].event == "message"
    assert events[-2].data["content"] == "Label it first."
    assert events[-1].data["status"] == "completed"
    # the model saw the skill stub in the system prompt, not its content
    system = scripted_llm.requests[0]["messages"][0]["content"]
    assert skill["name"] in system
    assert "Step 1" not in system
    # the tool result went back to the model in the second call
    tool_msg = scripted_llm.requests[1]["messages"][-1]
    assert tool_msg["role"] == "tool"
    assert "Step 1: label it." in tool_msg["content"]
    conv = (await live.get(f"/api/v1/conversations/{events[0].data['conversation_id']}")).json()
    assert [m["role"] for m in conv["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert conv["runs"][0]["status"] == "completed"
