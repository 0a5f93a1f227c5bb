"""The official `openai` SDK against a live Quiver: each agent as a model.

The LLM behind Quiver is the suite's scripted OpenAI-compatible server; the tool the agent
calls (`http_fetch`) reaches a real HTTP upstream on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.chat.conftest import CreateAgent
from tests.conftest import ADMIN_TOKEN
from tests.fixtures.live import of_kind, read_sse, serve_app
from tests.fixtures.scripted_llm import ScriptedLLM, Turn, tool_observations
from tests.openai_api.helpers import chat_key, chunks_of, data_lines

LIVE_SETTINGS = {"egress_allow_cidrs": ["127.0.0.0/8"]}
PRICE_PAGE = "Price list: the kettle costs 29.5 per kettle (tool output)."


async def _price(_: Request) -> PlainTextResponse:
    return PlainTextResponse(PRICE_PAGE)


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    async with serve_app(Starlette(routes=[Route("/price", _price)])) as base_url:  # type: ignore[arg-type]
        yield base_url


SDK = Callable[..., AsyncOpenAI]


@pytest.fixture
async def sdk(live_url: str) -> AsyncIterator[SDK]:
    """`sdk(key=ADMIN_TOKEN)`: an `AsyncOpenAI` client on the live Quiver (closed after)."""
    clients: list[AsyncOpenAI] = []

    def make(key: str = ADMIN_TOKEN) -> AsyncOpenAI:
        client = AsyncOpenAI(base_url=f"{live_url}/v1", api_key=key, max_retries=0, timeout=30)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.close()


async def test_models_lists_the_agents_the_key_may_use(
    sdk: SDK, live: httpx.AsyncClient, live_url: str, create_agent: CreateAgent
) -> None:
    first, second = await create_agent(), await create_agent()
    names = [m.id async for m in sdk().models.list()]
    assert {first["name"], second["name"]} <= set(names)
    assert names == sorted(names)

    restricted = sdk(await chat_key(live, agent_ids=[first["id"]]))
    page = await restricted.models.list()
    assert [(m.id, m.object, m.owned_by) for m in page.data] == [(first["name"], "model", "quiver")]
    assert page.data[0].created > 1_700_000_000
    card = await restricted.models.retrieve(first["name"])
    assert (card.id, card.created) == (first["name"], page.data[0].created)
    with pytest.raises(openai.NotFoundError) as hidden:
        await restricted.models.retrieve(second["name"])
    assert hidden.value.code == "model_not_found"


async def test_a_completion_runs_the_agent_and_its_tools_inside_quiver(
    sdk: SDK,
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(instructions="You answer questions about kettles.")
    scripted_llm.script(
        Turn(tool_calls=[("f1", "http_fetch", {"url": f"{upstream}/price"})], usage=(100, 10)),
        Turn(text="The kettle costs 29.5.", usage=(150, 7)),
    )
    raw = await sdk().chat.completions.with_raw_response.create(
        model=agent["name"],
        messages=[
            {"role": "system", "content": "Answer in one sentence."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello! Ask me about kettles."},
            {"role": "user", "content": [{"type": "text", "text": "What does the kettle cost?"}]},
        ],
    )
    completion = raw.parse()
    choice = completion.choices[0]
    assert choice.message.content == "The kettle costs 29.5."
    assert choice.message.role == "assistant"
    assert choice.finish_reason == "stop"
    assert completion.model == agent["name"]
    assert completion.object == "chat.completion"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (250, 17)
    assert completion.usage.total_tokens == 267
    run_id = raw.headers["x-run-id"]
    assert completion.id == f"chatcmpl-{run_id.replace('-', '')}"

    # The model saw the client's history after the agent's own instructions.
    first = scripted_llm.requests[0]["messages"]
    assert [m["role"] for m in first] == ["system", "system", "user", "assistant", "user"]
    assert "You answer questions about kettles." in first[0]["content"]
    assert [m["content"] for m in first[1:]] == [
        "Answer in one sentence.",
        "hi",
        "Hello! Ask me about kettles.",
        "What does the kettle cost?",
    ]
    # The tool ran inside Quiver; the client got the answer, not the tool's output.
    assert PRICE_PAGE in tool_observations(scripted_llm, 1)["f1"]
    assert PRICE_PAGE not in raw.http_response.text

    # The run is journaled like every run: replayable by X-Run-Id, in /runs and its conversation.
    async with live.stream("GET", f"/api/v1/runs/{run_id}/events") as replay:
        events = await read_sse(replay)
    assert events[0].event == "run_started"
    assert of_kind(events, "tool_result")[0]["ok"] is True
    assert of_kind(events, "message") == [{"content": "The kettle costs 29.5."}]
    assert events[-1].event == "run_finished"
    run = (await live.get(f"/api/v1/runs/{run_id}")).json()
    assert run["status"] == "completed"
    conversation = (await live.get(f"/api/v1/conversations/{run['conversation_id']}")).json()
    assert [m["role"] for m in conversation["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_streaming_sends_the_answer_as_chunks_then_usage_and_done(
    sdk: SDK, live_url: str, scripted_llm: ScriptedLLM, create_agent: CreateAgent, upstream: str
) -> None:
    agent = await create_agent()
    scripted_llm.script(
        Turn(
            text="Let me look.",
            tool_calls=[("f1", "http_fetch", {"url": f"{upstream}/price"})],
            usage=(30, 5),
        ),
        Turn(text="It costs 29.5, streamed word by word.", usage=(40, 9)),
    )
    stream = await sdk().chat.completions.create(
        model=agent["name"],
        messages=[{"role": "user", "content": "price?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert len({c.id for c in chunks}) == 1
    assert all(c.object == "chat.completion.chunk" and c.model == agent["name"] for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    # The model's text as it is written; a later turn starts a new paragraph. Tool output
    # never shows as content.
    assert text == "Let me look.\n\nIt costs 29.5, streamed word by word."
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert [f for f in finishes if f] == ["stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens == 84
    assert all(c.usage is None for c in chunks[:-1])


async def test_a_raw_stream_has_the_run_id_and_ends_with_done_without_usage(
    sdk: SDK,
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
) -> None:
    agent = await create_agent()
    scripted_llm.script(Turn(text="plain"))
    body = {"model": agent["name"], "messages": [{"role": "user", "content": "x"}], "stream": True}
    async with httpx.AsyncClient(base_url=live_url, timeout=30) as http:
        response = await http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = data_lines(response.text)
    assert lines[-1] == "[DONE]"
    chunks = chunks_of(response.text)
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    run = (await live.get(f"/api/v1/runs/{response.headers['x-run-id']}")).json()
    assert run["status"] == "completed"


async def test_user_is_the_end_user_of_the_tenancy_rules(
    sdk: SDK,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    live: httpx.AsyncClient,
) -> None:
    agent = await create_agent()
    key = await chat_key(live)
    scripted_llm.script(Turn(text="for alice"))
    raw = await sdk(key).chat.completions.with_raw_response.create(
        model=agent["name"], messages=[{"role": "user", "content": "hi"}], user="alice"
    )
    run_id = raw.headers["x-run-id"]
    async with httpx.AsyncClient(
        base_url=live_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
    ) as owner:
        as_alice = await owner.get(f"/api/v1/runs/{run_id}", headers={"X-Quiver-User": "alice"})
        assert as_alice.status_code == 200
        assert as_alice.json()["user"] == "alice"
        for headers in ({"X-Quiver-User": "bob"}, {}):
            other = await owner.get(f"/api/v1/runs/{run_id}", headers=headers)
            assert other.status_code == 404
        # The header works as for POST /api/v1/chat; a different `user` in the body is refused.
        clash = await owner.post(
            "/v1/chat/completions",
            json={
                "model": agent["name"],
                "messages": [{"role": "user", "content": "hi"}],
                "user": "bob",
            },
            headers={"X-Quiver-User": "alice"},
        )
    assert clash.status_code == 400
    assert clash.json()["error"]["type"] == "invalid_request_error"


async def test_errors_have_openais_shape(
    sdk: SDK, live: httpx.AsyncClient, live_url: str, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    other = await create_agent()
    user = [{"role": "user", "content": "hi"}]

    with pytest.raises(openai.AuthenticationError) as bad_key:
        await sdk("qv_not_a_key").chat.completions.create(model=agent["name"], messages=user)
    assert bad_key.value.status_code == 401
    assert bad_key.value.body == {
        "message": "invalid or revoked API key",
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }

    with pytest.raises(openai.NotFoundError) as unknown:
        await sdk().chat.completions.create(model="no-such-agent", messages=user)
    assert (unknown.value.code, unknown.value.param) == ("model_not_found", "model")
    assert "no-such-agent" in unknown.value.message

    restricted = sdk(await chat_key(live, agent_ids=[agent["id"]]))
    with pytest.raises(openai.NotFoundError) as hidden:
        await restricted.chat.completions.create(model=other["name"], messages=user)
    assert hidden.value.code == "model_not_found"

    refusals = [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages"),
        ({"messages": user, "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
        ({"messages": user, "n": 2}, "n"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "x"}}],
                    }
                ]
            },
            "messages[0].content",
        ),
        (
            {"messages": [{"role": "tool", "content": "r", "tool_call_id": "c"}, *user]},
            "messages",
        ),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages.0.role"),
    ]
    for fields, param in refusals:
        with pytest.raises(openai.BadRequestError) as bad:
            await sdk().chat.completions.create(model=agent["name"], **fields)  # type: ignore[call-overload]
        assert bad.value.status_code == 400
        assert bad.value.type == "invalid_request_error"
        assert bad.value.param == param, (fields, bad.value.body)

    async with httpx.AsyncClient(base_url=live_url, timeout=30) as http:
        no_key = await http.post("/v1/chat/completions", content=b"{not json")
        assert no_key.status_code == 401
        assert no_key.json()["error"]["type"] == "authentication_error"
        auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        broken = await http.post("/v1/chat/completions", content=b"{not json", headers=auth)
        assert broken.status_code == 400
        assert set(broken.json()["error"]) == {"message", "type", "param", "code"}
        missing = await http.get("/v1/nothing-here", headers=auth)
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "not_found"
        # The rest of the API keeps Quiver's own shape.
        elsewhere = await http.get("/api/v1/agents/not-a-uuid", headers=auth)
        assert set(elsewhere.json()) == {"error", "detail"}


async def test_a_failed_run_is_an_openai_error_streamed_or_not(
    sdk: SDK, live_url: str, scripted_llm: ScriptedLLM, create_agent: CreateAgent
) -> None:
    agent = await create_agent()
    user = [{"role": "user", "content": "hi"}]
    scripted_llm.script(Turn(status=400, error_message="the provider refused"))
    with pytest.raises(openai.InternalServerError) as failed:
        await sdk().chat.completions.create(model=agent["name"], messages=user)
    assert failed.value.status_code == 502
    assert failed.value.code == "llm_http_400"
    assert failed.value.type == "server_error"
    assert "the provider refused" in failed.value.message

    scripted_llm.script(Turn(status=400, error_message="refused mid-stream"))
    stream = await sdk().chat.completions.create(model=agent["name"], messages=user, stream=True)
    with pytest.raises(openai.APIError) as streamed:
        async for _ in stream:
            pass
    assert streamed.value.code == "llm_http_400"
    assert "refused mid-stream" in streamed.value.message


async def test_the_keys_rate_limit_applies(
    sdk: SDK,
    live: httpx.AsyncClient,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
) -> None:
    agent = await create_agent()
    client = sdk(await chat_key(live, rate_limit_per_minute=1))
    user = [{"role": "user", "content": "hi"}]
    await client.chat.completions.create(model=agent["name"], messages=user)
    with pytest.raises(openai.RateLimitError) as limited:
        await client.chat.completions.create(model=agent["name"], messages=user)
    assert limited.value.code == "rate_limit_exceeded"
    assert int(limited.value.response.headers["retry-after"]) >= 1
    assert json.loads(limited.value.response.text)["error"]["type"] == "rate_limit_error"


async def test_a_run_at_its_iteration_limit_finishes_with_length(
    sdk: SDK,
    live_url: str,
    scripted_llm: ScriptedLLM,
    create_agent: CreateAgent,
    upstream: str,
) -> None:
    agent = await create_agent(model_config_json={"max_iterations": 1})
    fetch = Turn(tool_calls=[("f1", "http_fetch", {"url": f"{upstream}/price"})])
    user = [{"role": "user", "content": "loop"}]
    scripted_llm.script(fetch)
    completion = await sdk().chat.completions.create(model=agent["name"], messages=user)
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == ""

    scripted_llm.script(fetch)
    stream = await sdk().chat.completions.create(model=agent["name"], messages=user, stream=True)
    finishes = [c.choices[0].finish_reason async for c in stream if c.choices]
    assert finishes[-1] == "length"
