"""Issue 7 end to end: tool profile, progress tracker, pre-hydration and scoped conventions,
wired into real runs over SSE (a live Quiver, a scripted LLM, a local HTTP upstream)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from app.kit.tokens import count_tokens
from tests.chat.conftest import CreateAgent, unique
from tests.fixtures.live import SseEvent, of_kind, read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn

DOC_TEXT = "Deployment guide: run make deploy, then check the dashboard."
BIG_TEXT = "lorem ipsum dolor sit amet " * 400
SLOW_S = 1.5


# --- fixtures ----------------------------------------------------------------------------------


async def _doc(_: Request) -> PlainTextResponse:
    return PlainTextResponse(DOC_TEXT)


async def _other(_: Request) -> PlainTextResponse:
    return PlainTextResponse("Another page with release notes.")


async def _big(_: Request) -> PlainTextResponse:
    return PlainTextResponse(BIG_TEXT)


async def _slow(_: Request) -> PlainTextResponse:
    await asyncio.sleep(SLOW_S)
    return PlainTextResponse("too late")


async def _flaky(request: Request) -> PlainTextResponse:
    """`mode=ok` succeeds; any other mode fails with a body made of that mode, so two failures
    with different modes have very different errors (the max-reattempts path, not "stuck")."""
    mode = request.query_params.get("mode", "x")
    if mode == "ok":
        return PlainTextResponse("all good")
    return PlainTextResponse(mode * 300, status_code=500)


async def _ticket(request: Request) -> PlainTextResponse:
    return PlainTextResponse(f"Ticket {request.path_params['ticket_id']}: login page is broken")


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    """A local HTTP upstream for http_fetch and connector actions."""
    app = Starlette(
        routes=[
            Route("/doc", _doc),
            Route("/other", _other),
            Route("/big", _big),
            Route("/slow", _slow),
            Route("/flaky", _flaky),
            Route("/tickets/{ticket_id}", _ticket),
        ]
    )
    async with serve_app(app) as base_url:  # type: ignore[arg-type]
        yield base_url


LIVE_SETTINGS = {"egress_allow_cidrs": ["127.0.0.0/8"]}
"""The live Quiver (tests/chat/conftest.py) reaches this module's upstream (loopback)."""


# --- helpers -----------------------------------------------------------------------------------


async def chat(live: httpx.AsyncClient, agent_id: str, message: str) -> list[SseEvent]:
    body = {"agent_id": agent_id, "message": message}
    async with live.stream("POST", "/api/v1/chat", json=body) as resp:
        assert resp.status_code == 200, await resp.aread()
        return await read_sse(resp)


async def replay(live: httpx.AsyncClient, run_id: str) -> list[SseEvent]:
    async with live.stream("GET", f"/api/v1/runs/{run_id}/events") as resp:
        assert resp.status_code == 200
        return await read_sse(resp)


def results_by_call(events: list[SseEvent]) -> dict[str, dict[str, Any]]:
    return {e.data["call_id"]: e.data for e in events if e.event == "tool_result"}


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


async def make_connector(
    live: httpx.AsyncClient, base_url: str, actions: list[dict[str, Any]]
) -> dict[str, Any]:
    resp = await live.post(
        "/api/v1/connectors",
        json={"name": unique("acme"), "base_url": base_url, "actions": actions},
    )
    assert resp.status_code == 201, resp.text
    data: dict[str, Any] = resp.json()
    return data


async def make_skill(live: httpx.AsyncClient, content: str) -> dict[str, Any]:
    resp = await live.post(
        "/api/v1/skills",
        json={"name": unique("skill"), "description": "a test skill", "content": content},
    )
    assert resp.status_code == 201, resp.text
    data: dict[str, Any] = resp.json()
    return data


def action(name: str, description: str, path: str = "/doc", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "method": "GET", "path": path, **extra}


# --- §6.1 tool profile -------------------------------------------------------------------------


async def test_tool_profile_decides_the_tools_seen_and_refuses_filtered_ones(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    connector = await make_connector(
        live,
        upstream,
        [
            action("list_items", "[verified] List the items."),
            action("get_item", "Get one item (not reviewed yet)."),
            action("delete_item", "[verified] Delete an item."),
            action("create_item", "[verified] Create an item."),
            action("search_items", "[verified] Search the items."),
            action("export_items", "[verified] Export every item."),
        ],
    )
    c = connector["name"]
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={
            "connector_tool_mode": "legacy",
            "tool_profile": {
                # include drops http_fetch; exclude drops delete_item; require_verified drops
                # recall_knowledge and get_item; the cap (actions come in name order) drops
                # search_items.
                "include": [f"{c}__*", "recall_*"],
                "exclude": ["*__delete_*"],
                "require_verified": True,
                "max_tools": 3,
            },
        },
    )
    expected = [f"{c}__create_item", f"{c}__export_items", f"{c}__list_items"]
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("excluded", f"{c}__delete_item", {}),
                ("not_included", "http_fetch", {"url": f"{upstream}/doc"}),
                ("capped", f"{c}__search_items", {}),
                ("unverified", f"{c}__get_item", {}),
                ("allowed", f"{c}__list_items", {}),
            ]
        ),
        Turn(text="finished"),
    )
    events = await chat(live, agent["id"], "tidy the items")
    assert events[0].event == "run_started"
    assert events[0].data["tools"] == expected
    assert tool_names(scripted_llm.requests[0]) == expected
    results = results_by_call(events)
    for call_id, name in [
        ("excluded", f"{c}__delete_item"),
        ("not_included", "http_fetch"),
        ("capped", f"{c}__search_items"),
        ("unverified", f"{c}__get_item"),
    ]:
        assert results[call_id]["ok"] is False
        assert results[call_id]["error"] == (
            f"Tool {name!r} is not available to this agent (excluded by its tool profile)"
        )
    assert results["allowed"]["ok"] is True
    assert DOC_TEXT in results["allowed"]["output"]
    # the model saw the refusals as observations and the run went on to its answer
    observations = [m for m in scripted_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(observations) == 5
    assert "excluded by its tool profile" in observations[0]["content"]
    assert events[-2].event == "message"
    assert events[-2].data["content"] == "finished"
    assert events[-1].data["status"] == "completed"


# --- §6.2 progress tracker ---------------------------------------------------------------------


async def test_stuck_step_is_skipped_refused_later_and_the_run_finishes(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    skill = await make_skill(live, "How to deploy.")
    agent = await create_agent(
        skill_ids=[skill["id"]],
        model_config_json={
            "step_iteration": {"max_reattempts_per_step": 5, "on_limit_reached": "skip_step"}
        },
    )
    missing = {"name": "no_such_skill"}
    scripted_llm.script(
        Turn(tool_calls=[("a1", "read_skill", missing)]),
        Turn(tool_calls=[("a2", "read_skill", missing)]),
        Turn(tool_calls=[("a3", "read_skill", missing)]),
        Turn(
            tool_calls=[
                ("a4", "read_skill", missing),
                ("ok", "read_skill", {"name": skill["name"]}),
            ]
        ),
        Turn(text="deployed without the missing skill"),
    )
    events = await chat(live, agent["id"], "deploy")
    reason = (
        "Step 'skill:no_such_skill' appears stuck: consecutive errors are 100.0% similar"
        " (threshold: 85%)"
    )
    limits = of_kind(events, "step_limit_reached")
    assert limits == [
        {"step_id": "skill:no_such_skill", "attempts": 2, "reason": reason, "action": "skip_step"}
    ]
    results = results_by_call(events)
    assert results["a1"]["ok"] is False
    assert results["a2"]["ok"] is False
    assert results["a1"]["error"] == results["a2"]["error"]
    skipped = f"Step 'skill:no_such_skill' was skipped for the rest of this run: {reason}"
    assert results["a3"]["ok"] is False
    assert results["a3"]["error"] == skipped
    assert results["a4"]["error"] == skipped
    assert results["ok"]["ok"] is True
    assert "How to deploy." in results["ok"]["output"]
    # the model is told about the skip in the observation of the call that hit the limit
    second = [m for m in scripted_llm.requests[2]["messages"] if m["role"] == "tool"][-1]
    assert second["content"].endswith(f"[{reason}. This step is skipped for the rest of the run.]")
    assert events[-1].data["status"] == "completed"
    assert events[-2].data["content"] == "deployed without the missing skill"
    journal = await replay(live, events[0].data["run_id"])
    assert of_kind(journal, "step_limit_reached") == limits
    assert [e.event for e in journal] == [e.event for e in events]


async def test_unreachable_connector_action_is_skipped_through_the_meta_tool(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    # nothing listens on port 9: every execute fails the same way (connection refused)
    connector = await make_connector(live, "http://127.0.0.1:9", [action("ping", "Ping it.")])
    c = connector["name"]
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={"step_iteration": {"max_reattempts_per_step": 3}},
    )
    execute = {"subcommand": "execute", "connector": c, "action": "ping"}
    scripted_llm.script(
        Turn(tool_calls=[("p1", "connector", execute)]),
        Turn(tool_calls=[("p2", "connector", execute)]),
        Turn(
            tool_calls=[
                ("p3", "connector", execute),
                ("d", "connector", {"subcommand": "discover", "connector": c}),
            ]
        ),
        Turn(text="the service is down"),
    )
    events = await chat(live, agent["id"], "ping the service")
    assert events[0].data["modes"]["connector"] == "progressive"
    step_id = f"connector:{c}/ping"
    (limit,) = of_kind(events, "step_limit_reached")
    assert limit["step_id"] == step_id
    assert limit["attempts"] == 2
    assert limit["action"] == "skip_step"
    assert limit["reason"].startswith(f"Step '{step_id}' appears stuck: consecutive errors are ")
    assert limit["reason"].endswith("% similar (threshold: 85%)")
    results = results_by_call(events)
    assert results["p1"]["error"] == results["p2"]["error"]
    assert results["p3"]["error"] == (
        f"Step '{step_id}' was skipped for the rest of this run: {limit['reason']}"
    )
    assert results["d"]["ok"] is True  # another step of the same connector still runs
    assert events[-1].data["status"] == "completed"


async def test_skipped_legacy_tool_is_withdrawn_from_the_tool_list(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    connector = await make_connector(
        live, "http://127.0.0.1:9", [action("ping", "Ping it."), action("pong", "Pong it.")]
    )
    ping = f"{connector['name']}__ping"
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={"connector_tool_mode": "legacy", "step_iteration": {}},
    )
    scripted_llm.script(
        Turn(tool_calls=[("p1", ping, {})]),
        Turn(tool_calls=[("p2", ping, {})]),
        Turn(text="down"),
    )
    events = await chat(live, agent["id"], "ping")
    assert of_kind(events, "step_limit_reached")[0]["action"] == "skip_step"
    assert ping in tool_names(scripted_llm.requests[1])
    assert ping not in tool_names(scripted_llm.requests[2])
    assert f"{connector['name']}__pong" in tool_names(scripted_llm.requests[2])


async def test_parallel_failures_of_one_step_stop_it_once(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    skill = await make_skill(live, "Parallel drill.")
    agent = await create_agent(skill_ids=[skill["id"]], model_config_json={"step_iteration": {}})
    missing = {"name": "nobody"}
    scripted_llm.script(
        Turn(tool_calls=[(f"n{i}", "read_skill", missing) for i in range(4)]),
        Turn(text="gave up on it"),
    )
    events = await chat(live, agent["id"], "read it four times at once")
    limits = of_kind(events, "step_limit_reached")
    assert [(x["step_id"], x["attempts"]) for x in limits] == [("skill:nobody", 2)]
    notes = [
        m["content"]
        for m in scripted_llm.requests[1]["messages"]
        if m["role"] == "tool" and "skipped for the rest of the run" in m["content"]
    ]
    assert len(notes) == 1
    assert events[-1].data["status"] == "completed"


async def test_max_reattempts_with_abort_task_stops_the_run(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    flaky = action(
        "flaky",
        "Sometimes fails.",
        path="/flaky",
        parameters={
            "type": "object",
            "properties": {"mode": {"type": "string", "x-location": "query"}},
            "required": ["mode"],
        },
    )
    connector = await make_connector(live, upstream, [flaky])
    tool = f"{connector['name']}__flaky"
    agent = await create_agent(
        connector_ids=[connector["id"]],
        model_config_json={
            "connector_tool_mode": "legacy",
            "step_iteration": {"max_reattempts_per_step": 2, "on_limit_reached": "abort_task"},
        },
    )
    scripted_llm.script(
        Turn(tool_calls=[("f1", tool, {"mode": "a"})]),
        Turn(tool_calls=[("s1", tool, {"mode": "ok"})]),  # a success resets the step
        Turn(tool_calls=[("f2", tool, {"mode": "b"})]),
        Turn(tool_calls=[("f3", tool, {"mode": "c"})]),
        Turn(text="never asked"),
    )
    events = await chat(live, agent["id"], "call the flaky thing")
    step_id = f"connector:{connector['name']}/flaky"
    reason = f"Step '{step_id}' reached max reattempts (2)"
    limits = of_kind(events, "step_limit_reached")
    assert limits == [{"step_id": step_id, "attempts": 2, "reason": reason, "action": "abort_task"}]
    results = results_by_call(events)
    assert [results[c]["ok"] for c in ("f1", "s1", "f2", "f3")] == [False, True, False, False]
    assert results["f3"]["error"].startswith("HTTP 500")
    finished = events[-1]
    assert finished.event == "run_finished"
    assert finished.data["status"] == "stopped"
    assert finished.data["reason"] == reason
    assert finished.data["escalated"] is False
    assert finished.data["iterations"] == 4
    assert "message" not in [e.event for e in events]
    assert len(scripted_llm.requests) == 4
    journal = await replay(live, events[0].data["run_id"])
    assert of_kind(journal, "step_limit_reached") == limits
    assert journal[-1].data == finished.data


async def test_escalate_stops_the_run_flagged_for_a_human(
    live: httpx.AsyncClient, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    skill = await make_skill(live, "Escalation drill.")
    agent = await create_agent(
        skill_ids=[skill["id"]],
        model_config_json={"step_iteration": {"on_limit_reached": "escalate"}},
    )
    missing = {"name": "ghost"}
    scripted_llm.script(
        Turn(tool_calls=[("g1", "read_skill", missing)]),
        Turn(tool_calls=[("g2", "read_skill", missing)]),
        Turn(text="never asked"),
    )
    events = await chat(live, agent["id"], "try the ghost skill")
    reason = (
        "Step 'skill:ghost' appears stuck: consecutive errors are 100.0% similar (threshold: 85%)"
    )
    assert of_kind(events, "step_limit_reached") == [
        {"step_id": "skill:ghost", "attempts": 2, "reason": reason, "action": "escalate"}
    ]
    finished = events[-1].data
    assert events[-1].event == "run_finished"
    assert (finished["status"], finished["reason"], finished["escalated"]) == (
        "stopped",
        reason,
        True,
    )
    journal = await replay(live, events[0].data["run_id"])
    assert of_kind(journal, "step_limit_reached") == of_kind(events, "step_limit_reached")
    assert journal[-1].data["escalated"] is True
    run = (await live.get(f"/api/v1/runs/{events[0].data['run_id']}")).json()
    assert (run["status"], run["reason"], run["escalated"]) == ("stopped", reason, True)


# --- §6.3 pre-hydration ------------------------------------------------------------------------

HEADER = "[PRE_HYDRATED_CONTEXT]\nThe following references were resolved from the task input:"


def injected(request: dict[str, Any]) -> list[str]:
    """The pre-hydrated system messages of one LLM request."""
    return [
        m["content"]
        for m in request["messages"]
        if m["role"] == "system" and m["content"].startswith("[PRE_HYDRATED_CONTEXT]")
    ]


async def test_prehydration_resolves_urls_connector_and_skill_refs_before_the_first_call(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    skill = await make_skill(live, "How to deploy.")
    ticket = action(
        "get_ticket",
        "Read one ticket.",
        path="/tickets/{ticket_id}",
        parameters={
            "type": "object",
            "properties": {"ticket_id": {"type": "string", "x-location": "path"}},
            "required": ["ticket_id"],
        },
    )
    connector = await make_connector(live, upstream, [ticket])
    agent = await create_agent(
        skill_ids=[skill["id"]],
        connector_ids=[connector["id"]],
        model_config_json={
            "connector_tool_mode": "legacy",
            "pre_hydration": {
                "custom_patterns": [
                    {"ref_type": "ticket", "pattern": r"TICKET-(\d+)"},
                    {"ref_type": "skill", "pattern": r"skill:(\w+)"},
                ],
                "resolution_tools": {
                    "url": "http_fetch",
                    "ticket": f"{connector['name']}__get_ticket",
                    "skill": "read_skill",
                },
            },
        },
    )
    url = f"{upstream}/doc"
    message = f"Check {url} and issue #42, then TICKET-7 and skill:{skill['name']}."
    events = await chat(live, agent["id"], message)
    contents = [
        f"URL: {url}\n\n{DOC_TEXT}",
        "HTTP 200 OK\nTicket 7: login page is broken",
        f"# Skill: {skill['name']}\n\nHow to deploy.",
    ]
    assert [e.event for e in events[:2]] == ["run_started", "pre_hydration_complete"]
    assert events[1].data == {
        "references_found": 4,
        "references_resolved": 3,
        "references_failed": 1,
        "total_tokens": sum(count_tokens(c) for c in contents),
    }
    expected = "\n".join(
        [
            HEADER,
            "",
            f"--- {url} (url) ---",
            contents[0],
            "",
            "--- 7 (ticket) ---",
            contents[1],
            "",
            f"--- {skill['name']} (skill) ---",
            contents[2],
            "",
            "(1 references could not be resolved)",
        ]
    )
    first = scripted_llm.requests[0]["messages"]
    assert [m["role"] for m in first] == ["system", "system", "user"]
    assert injected(scripted_llm.requests[0]) == [expected]
    assert first[1]["content"] == expected
    assert first[2]["content"] == message
    # pre-hydration is not a model tool call: no tool_call/tool_result events for it
    assert "tool_call" not in [e.event for e in events]
    assert events[-1].data["status"] == "completed"
    journal = await replay(live, events[0].data["run_id"])
    assert of_kind(journal, "pre_hydration_complete") == [events[1].data]
    # every resolution call is in the tool-call audit, with the kind of resource it reached
    audit = await audit_rows(live, events[0].data["run_id"], expect=3)
    assert sorted((c["kind"], c["name"], c["ok"]) for c in audit) == [
        ("builtin", "http_fetch", True),
        ("connector", f"{connector['name']}__get_ticket", True),
        ("skill", "read_skill", True),
    ]


async def audit_rows(live: httpx.AsyncClient, run_id: str, *, expect: int) -> list[Any]:
    """`GET /tool-calls` of a run, once its `expect` rows are written (off the call path)."""
    for _ in range(100):
        page = (await live.get("/api/v1/tool-calls", params={"run_id": run_id})).json()
        if page["total"] >= expect:
            rows: list[Any] = page["items"]
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {expect} tool-call rows for run {run_id}")


async def test_prehydration_injects_nothing_when_nothing_resolved(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(
        model_config_json={"pre_hydration": {"resolution_tools": {"url": "http_fetch"}}}
    )
    # a URL whose fetch fails (404), a PR and an issue without a resolution tool
    events = await chat(live, agent["id"], f"See {upstream}/missing, PR #8 and #7")
    assert of_kind(events, "pre_hydration_complete") == [
        {"references_found": 3, "references_resolved": 0, "references_failed": 3, "total_tokens": 0}
    ]
    assert [m["role"] for m in scripted_llm.requests[0]["messages"]] == ["system", "user"]
    assert injected(scripted_llm.requests[0]) == []
    # no references at all: no event either
    events = await chat(live, agent["id"], "plain words only")
    assert of_kind(events, "pre_hydration_complete") == []
    assert injected(scripted_llm.requests[1]) == []
    assert events[-1].data["status"] == "completed"
    # a resolution tool the tool profile filters out is refused for pre-hydration too
    profiled = await create_agent(
        model_config_json={
            "tool_profile": {"exclude": ["http_fetch"]},
            "pre_hydration": {"resolution_tools": {"url": "http_fetch"}},
        }
    )
    events = await chat(live, profiled["id"], f"Read {upstream}/doc")
    assert of_kind(events, "pre_hydration_complete") == [
        {"references_found": 1, "references_resolved": 0, "references_failed": 1, "total_tokens": 0}
    ]
    assert injected(scripted_llm.requests[2]) == []


async def test_prehydration_timeout_fails_slow_references_only(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(
        model_config_json={
            "pre_hydration": {"resolution_tools": {"url": "http_fetch"}, "timeout_s": 0.3}
        }
    )
    slow, fast = f"{upstream}/slow", f"{upstream}/other"
    events = await chat(live, agent["id"], f"Compare {slow} with {fast}")
    content = f"URL: {fast}\n\nAnother page with release notes."
    assert of_kind(events, "pre_hydration_complete") == [
        {
            "references_found": 2,
            "references_resolved": 1,
            "references_failed": 1,
            "total_tokens": count_tokens(content),
        }
    ]
    assert injected(scripted_llm.requests[0]) == [
        f"{HEADER}\n\n--- {fast} (url) ---\n{content}\n\n(1 references could not be resolved)"
    ]
    # the deadline cut the slow fetch: the run did not wait for it
    assert events[-1].data["elapsed_ms"] < SLOW_S * 1000


async def test_prehydration_budget_truncates_then_exhausts(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(
        model_config_json={
            "pre_hydration": {"resolution_tools": {"url": "http_fetch"}, "max_context_tokens": 30}
        }
    )
    big, doc = f"{upstream}/big", f"{upstream}/doc"
    events = await chat(live, agent["id"], f"Summarise {big} and {doc}")
    (done,) = of_kind(events, "pre_hydration_complete")
    assert (done["references_found"], done["references_resolved"]) == (2, 1)
    assert done["references_failed"] == 1  # the second item: "Token budget exhausted"
    assert 0 < done["total_tokens"] <= 30
    (text,) = injected(scripted_llm.requests[0])
    head = f"{HEADER}\n\n--- {big} (url) ---\nURL: {big}\n\nlorem ipsum"
    assert text.startswith(head)
    body = text.removeprefix(f"{HEADER}\n\n--- {big} (url) ---\n")
    item, _, note = body.partition("\n\n(")
    # the item is cut on a character boundary, so the marker follows a prefix of the page
    assert item.endswith("...[truncated]")
    assert f"URL: {big}\n\n{BIG_TEXT}".startswith(item.removesuffix("...[truncated]"))
    assert count_tokens(item) == done["total_tokens"]
    assert note == "1 references could not be resolved)"
    assert doc not in text


# --- §6.4 directory-scoped conventions ---------------------------------------------------------


@pytest.fixture
async def conventions(live: httpx.AsyncClient) -> AsyncIterator[list[dict[str, Any]]]:
    """Conventions created through the admin API (committed), deleted afterwards."""
    rows = [
        ("python", None, "Use type hints everywhere."),
        ("python", "src", "Keep modules under 400 lines."),
        ("python", "src/api", "Paginate every list endpoint with a cursor."),
        ("python", "src/api/handlers", "Handlers return typed pagination responses."),
        ("python", "src/api/handlers", "Never log request bodies."),
        ("python", "src", "Never log request bodies."),  # duplicate content, further away
        ("python", "src/web", "Templates live next to their views."),  # not on the path
        ("go", "src/api/handlers", "Return errors, do not panic."),  # another language
    ]
    created = []
    for language, directory, content in rows:
        resp = await live.post(
            "/api/v1/conventions",
            json={"language": language, "directory": directory, "content": content},
        )
        assert resp.status_code == 201, resp.text
        created.append(resp.json())
    yield created
    for row in created:
        assert (await live.delete(f"/api/v1/conventions/{row['id']}")).status_code == 204


async def test_recall_knowledge_walks_conventions_nearest_first(
    live: httpx.AsyncClient,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    conventions: list[dict[str, Any]],
) -> None:
    agent = await create_agent()
    scoped = {"scope": "conventions", "query": "python", "directory": "src/api/handlers"}
    scripted_llm.script(
        Turn(
            tool_calls=[
                ("all", "recall_knowledge", scoped),
                ("limited", "recall_knowledge", {**scoped, "limit": 3}),
                ("cased", "recall_knowledge", {**scoped, "query": "Python"}),
                ("parent", "recall_knowledge", {**scoped, "directory": "src/api"}),
                ("ranked", "recall_knowledge", {"query": "cursor endpoint pagination"}),
            ]
        ),
        Turn(text="noted"),
    )
    events = await chat(live, agent["id"], "what are the rules for handlers?")
    assert "recall_knowledge" in events[0].data["tools"]
    results = results_by_call(events)
    walk = [
        "- [src/api/handlers] Handlers return typed pagination responses.",
        "- [src/api/handlers] Never log request bodies.",
        "- [src/api] Paginate every list endpoint with a cursor.",
        "- [src] Keep modules under 400 lines.",
        "- [python] Use type hints everywhere.",
    ]
    assert results["all"]["ok"] is True
    assert results["all"]["output"] == "\n".join(walk)
    assert results["limited"]["output"] == "\n".join(walk[:3])
    assert results["cased"]["output"] == "\n".join(walk)
    # from src/api the handlers level is not on the path, so src's copy of a rule counts
    assert results["parent"]["output"] == "\n".join(
        [*walk[2:4], "- [src] Never log request bodies.", walk[4]]
    )
    # without scope: ranked search (two matching terms beat one; no match, no line)
    assert results["ranked"]["output"] == "\n".join(
        [
            "- [src/api] Paginate every list endpoint with a cursor.",
            "- [src/api/handlers] Handlers return typed pagination responses.",
        ]
    )
    assert events[-1].data["status"] == "completed"


# --- configuration validated on write ----------------------------------------------------------


async def test_invalid_custom_pattern_regex_is_a_422_naming_the_key(
    live: httpx.AsyncClient, create_agent: CreateAgent
) -> None:
    bad = {"pre_hydration": {"custom_patterns": [{"ref_type": "jira", "pattern": "JIRA-(\\d+"}]}}
    key = "pre_hydration.custom_patterns.0.pattern"
    created = await live.post(
        "/api/v1/agents", json={"name": unique("agent"), "model_config_json": bad}
    )
    assert created.status_code == 422
    detail = created.json()["detail"]
    assert detail.startswith("model_config_json: ")
    assert f"{key}: invalid regular expression: missing )" in detail
    agent = await create_agent()
    patched = await live.patch(f"/api/v1/agents/{agent['id']}", json={"model_config_json": bad})
    assert patched.status_code == 422
    assert f"{key}: invalid regular expression" in patched.json()["detail"]
    # the agent is unchanged and a valid pattern is accepted
    good = {"pre_hydration": {"custom_patterns": [{"ref_type": "jira", "pattern": "JIRA-(\\d+)"}]}}
    patched = await live.patch(f"/api/v1/agents/{agent['id']}", json={"model_config_json": good})
    assert patched.status_code == 200, patched.text
    assert patched.json()["model_config_json"]["pre_hydration"]["custom_patterns"] == [
        {"ref_type": "jira", "pattern": "JIRA-(\\d+)"}
    ]
