"""A chat where the model looks something up with `knowledge` and answers citing the source
(real uvicorn server, scripted LLM, real corpus from tests/data/knowledge)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx

from tests.chat.conftest import CreateAgent, unique
from tests.chat.test_chat_behaviour import chat
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge"
SOURCE = re.compile(r"^\[1\] source: (\S+) > (.+?) \(offset (\d+)\) · score (\d\.\d\d)$", re.M)


async def test_the_model_answers_with_a_citation_from_the_knowledge_base(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    resp = await live.post(
        "/api/v1/knowledge-bases",
        json={"name": unique("pydocs"), "description": "Python language reference"},
    )
    assert resp.status_code == 201, resp.text
    kb = resp.json()
    for name in ("python-reference/try.txt", "python-dotenv-README.md"):
        path = DATA / name
        files = {"file": (path.name, path.read_bytes(), "text/plain")}
        added = await live.post(f"/api/v1/knowledge-bases/{kb['id']}/documents", files=files)
        assert added.status_code == 201, added.text
    agent = await create_agent(knowledge_base_ids=[kb["id"]])
    question = "What happens to a pending exception if finally runs a return?"

    def answer(body: dict[str, Any]) -> Turn:
        observation = next(m for m in body["messages"] if m["role"] == "tool")["content"]
        cited = SOURCE.search(observation)
        assert cited is not None, observation
        return Turn(text=f"The saved exception is discarded. [source: {cited[1]}, {cited[2]}]")

    scripted_llm.script(Turn(tool_calls=[("k1", "knowledge", {"query": question})]), answer)
    events = await chat(live, agent["id"], question)

    tools = {t["function"]["name"]: t["function"] for t in scripted_llm.requests[0]["tools"]}
    assert (
        f"- {kb['name']} (2 documents): Python language reference"
        in (tools["knowledge"]["description"])
    )
    result = next(e for e in events if e.event == "tool_result")
    assert result.data["ok"]
    assert f"[1] source: {kb['name']}/try.txt > " in result.data["output"]
    assert "exception is discarded" in result.data["output"]
    final = next(e for e in events if e.event == "message")
    assert final.data["content"] == (
        f"The saved exception is discarded. [source: {kb['name']}/try.txt, "
        'The "try" statement > "finally" clause]'
    )
    assert events[-1].data["status"] == "completed"
