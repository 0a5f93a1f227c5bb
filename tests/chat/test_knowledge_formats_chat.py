"""A chat whose model looks up facts planted in a PDF page, a DOCX table, an XLSX sheet, a
PPTX slide, an EPUB chapter, a CSV, a JSON, an HTML page, a Markdown and a text file through
the `knowledge` tool, and cites them with page, slide, sheet or section (real uvicorn server,
scripted LLM, files made by tests/knowledge/files.py)."""

from __future__ import annotations

import re

import httpx

from tests.chat.conftest import CreateAgent, unique
from tests.chat.test_chat_behaviour import chat
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.knowledge.files import PLANTED

CITATION = re.compile(r"^\[(\d+)\] source: (\S+?)/(\S+?)(?: > (.+?))? \(offset \d+\) · score", re.M)


async def test_facts_in_every_format_are_found_and_cited_in_a_chat(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    resp = await live.post("/api/v1/knowledge-bases", json={"name": unique("harbour")})
    assert resp.status_code == 201, resp.text
    kb = resp.json()
    for planted in PLANTED:
        files = {"file": (planted.filename, planted.make(), "application/octet-stream")}
        added = await live.post(f"/api/v1/knowledge-bases/{kb['id']}/documents", files=files)
        assert added.status_code == 201, added.text
    agent = await create_agent(knowledge_base_ids=[kb["id"]])
    scripted_llm.script(
        *(
            Turn(tool_calls=[(f"k{i}", "knowledge", {"query": p.question})])
            for i, p in enumerate(PLANTED)
        ),
        Turn(text="All found."),
    )
    events = await chat(live, agent["id"], "Answer my harbour questions.")
    assert events[-1].data["status"] == "completed"
    results = {e.data["call_id"]: e.data for e in events if e.event == "tool_result"}
    for i, planted in enumerate(PLANTED):
        output = results[f"k{i}"]["output"]
        assert results[f"k{i}"]["ok"], output
        blocks = re.split(r"\n\n(?=\[\d+\] source: )", output.split("\n\n", 1)[1])
        cited = [(CITATION.match(b), b) for b in blocks]
        answering = [m for m, block in cited if m and planted.answer in block]
        assert answering, (planted.filename, output)
        match = answering[0]
        assert (match[2], match[3]) == (kb["name"], planted.filename), output
        assert planted.heading in (match[4] or ""), (planted.filename, match[0])
        assert int(match[1]) <= 3, (planted.filename, output)  # among the best three
