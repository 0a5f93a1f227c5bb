"""Issue 9 behaviours, streamed from a real uvicorn server with a scripted LLM."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from app.config import Settings
from app.main import create_app
from tests.chat.conftest import CreateAgent, unique
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import SseEvent, SseReader, read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn


async def chat(
    live: httpx.AsyncClient, agent_id: str, message: str, conversation_id: str | None = None
) -> list[SseEvent]:
    body: dict[str, Any] = {"agent_id": agent_id, "message": message}
    if conversation_id:
        body["conversation_id"] = conversation_id
    async with live.stream("POST", "/api/v1/chat", json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        return await read_sse(resp)


def kinds(events: list[SseEvent]) -> list[str]:
    return [e.event for e in events]


async def make_skills(
    live: httpx.AsyncClient, count: int, *, content: str = "body"
) -> list[dict[str, Any]]:
    skills = []
    for i in range(count):
        resp = await live.post(
            "/api/v1/skills",
            json={
                "name": unique(f"s{i}"),
                "description": f"skill number {i}",
                "content": f"{content} {i}",
            },
        )
        skills.append(resp.json())
    return skills


async def test_parallel_tool_calls_in_one_turn_all_answered(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    a, b = await make_skills(live, 2)
    agent = await create_agent(skill_ids=[a["id"], b["id"]])
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("c1", "read_skill", {"name": a["name"]}),
                ("c2", "read_skill", {"name": b["name"]}),
            ]
        ),
        Turn(text="both read"),
    )
    events = await chat(live, agent["id"], "read both")
    calls = [e for e in events if e.event == "tool_call"]
    results = {e.data["call_id"]: e for e in events if e.event == "tool_result"}
    assert [c.data["call_id"] for c in calls] == ["c1", "c2"]
    assert results["c1"].data["ok"]
    assert "body 0" in results["c1"].data["output"]
    assert results["c2"].data["ok"]
    assert "body 1" in results["c2"].data["output"]
    tool_messages = [m for m in scripted_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1", "c2"]


async def test_malformed_tool_arguments_become_an_error_observation(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    (skill,) = await make_skills(live, 1)
    agent = await create_agent(skill_ids=[skill["id"]])
    scripted_llm.script(
        Turn(tool_calls=[("bad", "read_skill", '{"name": ')]),
        Turn(text="recovered"),
    )
    events = await chat(live, agent["id"], "go")
    result = next(e for e in events if e.event == "tool_result")
    assert result.data["ok"] is False
    assert "malformed JSON" in result.data["error"]
    assert events[-1].data["status"] == "completed"
    assert scripted_llm.requests[1]["messages"][-1]["content"].startswith("Error:")


async def test_unknown_tool_name_lists_valid_ones(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    (skill,) = await make_skills(live, 1)
    agent = await create_agent(skill_ids=[skill["id"]])
    scripted_llm.script(
        Turn(tool_calls=[("c1", "read_skil", {"name": skill["name"]})]), Turn(text="ok")
    )
    events = await chat(live, agent["id"], "go")
    result = next(e for e in events if e.event == "tool_result")
    assert result.data["ok"] is False
    assert "read_skill" in result.data["error"]


async def test_llm_500_then_success_is_retried(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(status=500), Turn(text="after retry"))
    events = await chat(live, agent["id"], "hi")
    assert events[-2].data["content"] == "after retry"
    assert len(scripted_llm.requests) == 2


async def test_llm_down_ends_in_run_failed(
    committing_settings: Settings, scripted_llm: ScriptedLLM
) -> None:
    dead = committing_settings.model_copy(
        update={"llm_base_url": "http://127.0.0.1:9/v1", "llm_max_retries": 1}
    )
    async with (
        serve_app(create_app(dead)) as base,
        httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30
        ) as client,
    ):
        agent = (await client.post("/api/v1/agents", json={"name": unique("a")})).json()
        events = await chat(client, agent["id"], "hi")
    assert kinds(events) == ["run_started", "run_failed"]
    assert events[-1].data["error"]["code"] == "llm_unavailable"
    assert "Traceback" not in events[-1].data["error"]["message"]


async def test_no_llm_configured_is_a_clear_503(committing_settings: Settings) -> None:
    bare = committing_settings.model_copy(update={"llm_base_url": ""})
    async with (
        serve_app(create_app(bare)) as base,
        httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        ) as client,
    ):
        agent = (await client.post("/api/v1/agents", json={"name": unique("a")})).json()
        resp = await client.post("/api/v1/chat", json={"agent_id": agent["id"], "message": "x"})
        assert resp.status_code == 503
        assert "QUIVER_LLM_BASE_URL" in resp.json()["detail"]
        assert (await client.get("/api/v1/agents")).status_code == 200


async def test_disconnect_leaves_run_running_and_replay_resumes(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(text="a slow answer in many pieces " * 8, token_delay_s=0.02))
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "hi"}
    ) as resp:
        run_id = resp.headers["x-run-id"]
        first = await read_sse(resp, stop_after=2)
    assert first[0].event == "run_started"
    last_seen = first[-1].id
    # the run keeps going without a listener; replay resumes after the last event seen
    async with live.stream(
        "GET", f"/api/v1/runs/{run_id}/events", headers={"Last-Event-ID": str(last_seen)}
    ) as resp:
        rest = await read_sse(resp)
    assert rest[0].id == last_seen + 1
    assert rest[-1].event == "run_finished"
    text = "".join(e.data["text"] for e in first + rest if e.event == "model_delta")
    assert text == "a slow answer in many pieces " * 8
    # a full replay of a finished run returns the same journal
    async with live.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
        full = await read_sse(resp)
    assert [e.id for e in full] == list(range(1, len(full) + 1))
    assert full[-1].data == rest[-1].data


async def test_cancel_stops_a_running_run(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(text="word " * 200, token_delay_s=0.02))
    async with live.stream(
        "POST", "/api/v1/chat", json={"agent_id": agent["id"], "message": "hi"}
    ) as resp:
        run_id = resp.headers["x-run-id"]
        cancel = await live.post(f"/api/v1/runs/{run_id}/cancel")
        assert cancel.status_code == 200
        assert cancel.json()["cancel_requested"] is True
        events = await read_sse(resp)
    assert events[-1].event == "run_finished"
    assert events[-1].data["status"] == "cancelled"
    missing = await live.post("/api/v1/runs/00000000-0000-0000-0000-000000000000/cancel")
    assert missing.status_code == 404


async def test_second_concurrent_run_in_a_conversation_is_refused(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    scripted_llm.script(
        Turn(text="first"), Turn(text="slow " * 50, token_delay_s=0.02), Turn(text="third")
    )
    events = await chat(live, agent["id"], "one")
    conversation_id = events[0].data["conversation_id"]
    body = {"agent_id": agent["id"], "message": "two", "conversation_id": conversation_id}
    async with live.stream("POST", "/api/v1/chat", json=body) as resp:
        reader = SseReader(resp)
        await reader.read(stop_after=1)
        clash = await live.post("/api/v1/chat", json={**body, "message": "three"})
        assert clash.status_code == 409
        assert clash.json()["error"] == "Conflict"
        await reader.read()
    # once it finished, the conversation continues with the full history
    events = await chat(live, agent["id"], "three", conversation_id)
    assert events[-1].data["status"] == "completed"
    roles = [m["role"] for m in scripted_llm.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]


async def test_a_conversation_continues_only_with_its_own_agent(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent, other = await create_agent(), await create_agent()
    scripted_llm.script(Turn(text="first answer"), Turn(text="second answer"))
    events = await chat(live, agent["id"], "first question")
    conversation_id = events[0].data["conversation_id"]
    body = {"agent_id": other["id"], "message": "hijack", "conversation_id": conversation_id}
    refused = await live.post("/api/v1/chat", json=body)
    assert refused.status_code == 422, refused.text
    assert "another agent" in refused.json()["detail"]
    # nothing of the refused message was stored: the next run sees the history as it was
    events = await chat(live, agent["id"], "second question", conversation_id)
    assert events[-1].data["status"] == "completed"
    sent = [(m["role"], m.get("content")) for m in scripted_llm.requests[-1]["messages"][1:]]
    assert sent == [
        ("user", "first question"),
        ("assistant", "first answer"),
        ("user", "second question"),
    ]
    stored = (await live.get(f"/api/v1/conversations/{conversation_id}")).json()
    assert [m["content"] for m in stored["messages"]] == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]
    assert len(stored["runs"]) == 2


async def test_max_iterations_ends_the_run(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    (skill,) = await make_skills(live, 1)
    agent = await create_agent(skill_ids=[skill["id"]], model_config_json={"max_iterations": 2})
    call = Turn(tool_calls=[("c", "read_skill", {"name": skill["name"]})])
    scripted_llm.script(call, call, call)
    events = await chat(live, agent["id"], "loop")
    assert events[-1].data["status"] == "max_iterations"
    assert events[-1].data["iterations"] == 2


async def test_selection_above_threshold_then_request_tools_loads_more(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    actions = [
        {
            "name": f"op_{i}",
            "description": f"operation number {i} on widgets",
            "method": "GET",
            "path": f"/op/{i}",
        }
        for i in range(20)
    ]
    actions[7]["description"] = "delete a gizmo permanently"
    connector = (
        await live.post(
            "/api/v1/connectors",
            json={"name": unique("widgets"), "base_url": "http://127.0.0.1:9", "actions": actions},
        )
    ).json()
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={
            "connector_tool_mode": "legacy",
            "tool_selection_threshold": 5,
            "tool_selection_max": 3,
        },
    )
    target = f"{connector['name']}__op_7"

    def second_turn(body: dict[str, Any]) -> Turn:
        names = [t["function"]["name"] for t in body["tools"]]
        assert target in names
        return Turn(text="loaded")

    scripted_llm.script(
        Turn(tool_calls=[("c", "request_tools", {"tool_names": [target]})]), second_turn
    )
    events = await chat(live, agent["id"], "list widgets")
    selection = next(e for e in events if e.event == "tool_selection")
    assert selection.data["strategy"] == "hybrid"
    assert selection.data["total"] > 5
    first_tools = [t["function"]["name"] for t in scripted_llm.requests[0]["tools"]]
    assert "request_tools" in first_tools
    assert target not in first_tools
    loaded = next(e for e in events if e.event == "tools_loaded")
    assert loaded.data["names"] == [target]
    assert events[-1].data["status"] == "completed"


async def test_tools_past_runs_called_together_are_selected_together(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    """The co-use prior (README "Selection"): runs that called A and B together bring B into
    the selection of a request that ranks A first and B below the top 3."""
    actions = [
        {"name": "find_gizmos", "description": "search gizmos by color", "method": "GET"},
        {"name": "forecast", "description": "weather forecast for a city", "method": "GET"},
        *(
            {"name": f"op_{i}", "description": f"operation number {i} on widgets", "method": "GET"}
            for i in range(5)
        ),
    ]
    for action in actions:
        action["path"] = f"/{action['name']}"
    connector = (
        await live.post(
            "/api/v1/connectors",
            json={"name": unique("shop"), "base_url": "http://127.0.0.1:9", "actions": actions},
        )
    ).json()
    top, companion = (f"{connector['name']}__{n}" for n in ("find_gizmos", "forecast"))
    selecting = {"connector_tool_mode": "legacy", "tool_selection_max": 3}
    # Two past runs below the threshold (no selection, so no prior read yet) call both tools.
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={**selecting, "tool_selection_threshold": 50},
    )
    runs = []
    for _ in range(2):
        scripted_llm.script(
            Turn(tool_calls=[("a", top, {}), ("b", companion, {})]), Turn(text="done")
        )
        events = await chat(live, agent["id"], "red gizmos and the weather")
        assert events[-1].data["status"] == "completed"
        runs.append(events[0].data["run_id"])
    for run_id in runs:  # the audit is written off the call path: wait for its rows
        for _ in range(100):
            page = (await live.get("/api/v1/tool-calls", params={"run_id": run_id})).json()
            if page["total"] == 2:
                break
            await asyncio.sleep(0.05)
        assert page["total"] == 2
    edit = {"model_config_json": {**selecting, "tool_selection_threshold": 5}}
    assert (await live.patch(f"/api/v1/agents/{agent['id']}", json=edit)).status_code == 200

    # A request of the same kind from an agent without that history: the ranker alone.
    fresh = await create_agent(
        connector_ids=[connector["id"]], model_config_json=edit["model_config_json"]
    )
    selected: dict[str, list[str]] = {}
    for agent_id in (fresh["id"], agent["id"]):
        scripted_llm.script(Turn(text="ok"))
        events = await chat(live, agent_id, "search gizmos by color")
        selected[agent_id] = next(e for e in events if e.event == "tool_selection").data["selected"]
    alone, with_history = selected[fresh["id"]], selected[agent["id"]]
    assert alone[0] == top
    assert companion not in alone
    assert with_history == [*alone[:2], companion]


async def test_long_run_of_discover_calls_is_compacted_oldest_first(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    skills = await make_skills(live, 6, content="lorem ipsum dolor sit amet " * 200)
    agent = await create_agent(
        skill_ids=[s["id"] for s in skills],
        model_config_json={"context_tokens": 2048, "output_reserve_tokens": 0},
    )
    scripted_llm.script(
        *[
            Turn(tool_calls=[(f"c{i}", "read_skill", {"name": s["name"]})])
            for i, s in enumerate(skills)
        ],
        Turn(text="done"),
    )
    events = await chat(live, agent["id"], "read all")
    compactions = [e for e in events if e.event == "context_compacted"]
    assert compactions
    first = compactions[0].data
    assert first["after_tokens"] < first["before_tokens"]
    assert first["cleared"][0] == f"read_skill {skills[0]['name']}"
    last_request = scripted_llm.requests[-1]["messages"]
    tool_contents = [m["content"] for m in last_request if m["role"] == "tool"]
    assert tool_contents[0].startswith("[cleared: read_skill")
    assert "lorem ipsum" in tool_contents[-1]
    assert events[-1].data["status"] == "completed"
    await asyncio.sleep(0)


async def test_a_run_lost_with_its_process_does_not_block_the_conversation(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    committing_settings: Settings,
) -> None:
    from datetime import timedelta

    from app.chat.models import Run
    from app.db.base import utcnow
    from app.db.engine import create_engine, create_sessionmaker

    agent = await create_agent()
    events = await chat(live, agent["id"], "one")
    conversation_id = events[0].data["conversation_id"]
    engine = create_engine(committing_settings)
    try:
        async with create_sessionmaker(engine)() as session:
            ghost = Run(
                conversation_id=conversation_id,
                agent_id=agent["id"],
                created_at=utcnow() - timedelta(minutes=30),
            )
            session.add(ghost)
            await session.commit()
            ghost_id = str(ghost.id)
    finally:
        await engine.dispose()
    # replaying the ghost ends (its worker is unknown: the heartbeat closes it as lost)
    async with live.stream("GET", f"/api/v1/runs/{ghost_id}/events") as resp:
        first = await read_sse(resp)
    assert [(e.id, e.event, e.data["error"]["code"]) for e in first] == [
        (1, "run_failed", "run_lost")
    ]
    events = await chat(live, agent["id"], "two", conversation_id)
    assert events[-1].data["status"] == "completed"
    conv = (await live.get(f"/api/v1/conversations/{conversation_id}")).json()
    ghost_row = next(r for r in conv["runs"] if r["id"] == ghost_id)
    assert ghost_row["status"] == "failed"
    assert ghost_row["error"]["code"] == "run_lost"
    async with live.stream("GET", f"/api/v1/runs/{ghost_id}/events") as resp:
        replay = await read_sse(resp)
    assert [e.event for e in replay] == ["run_failed"]
