"""Chat inputs that used to answer 500 or abort a stream server-side: `Last-Event-ID` values
that are not ASCII sequence numbers in the journal's range, `after` out of range, NUL
characters in a chat message."""

from __future__ import annotations

import httpx
import pytest

from app.chat.router import MAX_SEQ, parse_last_event_id
from app.errors import Invalid
from tests.chat.conftest import CreateAgent
from tests.fixtures.crud import assert_error
from tests.fixtures.live import read_sse
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


async def _finished_run(live: httpx.AsyncClient, agent_id: str) -> str:
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent_id, "message": "hi"}
    ) as resp:
        assert resp.status_code == 200
        run_id = resp.headers["x-run-id"]
        events = await read_sse(resp)
    assert events[-1].event == "run_finished"
    return run_id


@pytest.mark.parametrize(
    "header",
    ["²", "\u0661", "99999999999999999999", str(MAX_SEQ + 1), "-1", "1e3", "0x10", "1 2"],
)
async def test_bad_last_event_id_is_a_422(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent, header: str
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(text="hello"))
    run_id = await _finished_run(live, agent["id"])
    resp = await live.get(
        f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": header.encode()}
    )
    assert_error(resp, 422, "Invalid", mentions=["Last-Event-ID"])


async def test_after_out_of_range_is_a_422_and_in_range_replays(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(text="hello"))
    run_id = await _finished_run(live, agent["id"])
    resp = await live.get(f"/api/v1/runs/{run_id}/events", params={"after": MAX_SEQ + 1})
    assert_error(resp, 422, "Invalid", mentions=["after"])
    async with live.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": str(MAX_SEQ)}
    ) as tail:
        assert tail.status_code == 200
        assert await read_sse(tail) == []  # nothing after the last possible seq; run is over
    async with live.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": "1"}
    ) as rest:
        events = await read_sse(rest)
    assert events[0].id == 2
    assert events[-1].event == "run_finished"


async def test_nul_in_a_chat_message_is_refused_before_a_run_starts(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    resp = await live.post("/api/v1/chat", json={"agent_id": agent["id"], "message": "a\u0000"})
    assert_error(resp, 422, "Invalid", mentions=["message", "NUL"])
    assert scripted_llm.requests == []


def test_parse_last_event_id_accepts_only_ascii_digits_in_range() -> None:
    assert parse_last_event_id("0") == 0
    assert parse_last_event_id(f" {MAX_SEQ} ") == MAX_SEQ
    for bad in ["", "²", "\u0663", "+1", str(MAX_SEQ + 1), "1" * 11]:
        with pytest.raises(Invalid):
            parse_last_event_id(bad)
