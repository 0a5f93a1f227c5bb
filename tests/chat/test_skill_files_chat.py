"""The third level of progressive disclosure: a chat reads a skill, sees its files listed,
and reads one of them with `read_skill` (real uvicorn server, scripted LLM, the real
`mcp-builder` folder from anthropics/skills in tests/data/skills)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.chat.conftest import CreateAgent, unique
from tests.chat.test_chat_behaviour import chat
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.skills.test_folders import zip_folder

FOLDER = Path(__file__).resolve().parents[1] / "data" / "skills" / "mcp-builder"


async def test_read_skill_lists_the_folder_and_reads_one_file(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    name = unique("mcp-builder").replace("_", "-")
    resp = await live.post(
        "/api/v1/skills/import",
        files={"file": ("mcp-builder.zip", zip_folder(FOLDER), "application/zip")},
        data={"name": name},
    )
    assert resp.status_code == 201, resp.text
    agent = await create_agent(skill_ids=[resp.json()["id"]])
    best = (FOLDER / "reference" / "mcp_best_practices.md").read_text(encoding="utf-8")
    script = (FOLDER / "scripts" / "connections.py").read_text(encoding="utf-8")
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("r1", "read_skill", {"name": name}),
                ("r2", "read_skill", {"name": f"{name}/reference/mcp_best_practices.md"}),
                ("r3", "read_skill", {"name": name, "path": "scripts/connections.py"}),
                ("r4", "read_skill", {"name": name, "path": "../../etc/passwd"}),
            ]
        ),
        Turn(text="Done."),
    )
    events = await chat(live, agent["id"], "How should I name MCP tools?")

    tool = next(
        t["function"]
        for t in scripted_llm.requests[0]["tools"]
        if t["function"]["name"] == "read_skill"
    )
    assert "path" in tool["parameters"]["properties"]
    results = {e.data["call_id"]: e.data for e in events if e.event == "tool_result"}
    listing = results["r1"]["output"]
    assert listing.startswith(f"# Skill: {name}\n\n# MCP Server Development Guide")
    assert f"## Files in {name}" in listing
    assert "- reference/mcp_best_practices.md (7.2 KB)" in listing
    assert "- scripts/evaluation.py (12.3 KB, script: stored, not run here)" in listing
    assert f'read_skill(name="{name}", path="LICENSE.txt")' in listing
    assert results["r2"]["ok"]
    assert results["r2"]["output"] == f"# {name}/reference/mcp_best_practices.md\n\n{best}"
    assert results["r3"]["output"] == f"# {name}/scripts/connections.py\n\n{script}"
    assert not results["r4"]["ok"]
    assert "Unknown file '../../etc/passwd'" in results["r4"]["error"]
    assert "reference/mcp_best_practices.md" in results["r4"]["error"]
    assert events[-1].data["status"] == "completed"
