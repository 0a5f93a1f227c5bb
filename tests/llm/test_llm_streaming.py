import asyncio
from typing import Any

import pytest
from pydantic import SecretStr

from app.config import Settings
from app.llm.client import LlmClient
from app.llm.types import ChatMessage, Completion, TextDelta, ToolCallRequest, Usage
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.llm.conftest import API_KEY, ClientFactory

READ_SKILL = {
    "type": "function",
    "function": {
        "name": "read_skill",
        "description": "Read a skill",
        "parameters": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


async def collect(client: LlmClient, **kwargs: Any) -> tuple[list[str], list[Completion]]:
    deltas: list[str] = []
    completions: list[Completion] = []
    messages = kwargs.pop("messages", [ChatMessage.user("hi")])
    async for item in client.stream_chat(messages, tools=kwargs.pop("tools", None), **kwargs):
        if isinstance(item, TextDelta):
            assert not completions, "a TextDelta arrived after the Completion"
            deltas.append(item.text)
        else:
            completions.append(item)
    return deltas, completions


async def test_stream_yields_text_deltas_then_one_completion(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(text="The quick brown fox jumps."))
    deltas, completions = await collect(make_client(scripted_llm))
    assert len(deltas) == 5
    assert "".join(deltas) == "The quick brown fox jumps."
    assert len(completions) == 1
    assert completions[0].message == ChatMessage.assistant("The quick brown fox jumps.")
    assert completions[0].finish_reason == "stop"


async def test_request_body_is_openai_streaming_with_native_tools(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    messages = [ChatMessage.system("be brief"), ChatMessage.user("hi")]
    await collect(
        make_client(scripted_llm),
        messages=messages,
        tools=[READ_SKILL],
        temperature=0.2,
        model="other-model",
    )
    body = scripted_llm.requests[0]
    assert body["model"] == "other-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [READ_SKILL]
    assert body["tool_choice"] == "auto"
    assert body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert scripted_llm.request_headers[0]["authorization"] == f"Bearer {API_KEY}"


async def test_request_without_tools_omits_tool_choice_and_wraps_bare_functions(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    client = make_client(scripted_llm)
    await collect(client)
    assert "tools" not in scripted_llm.requests[0]
    assert "tool_choice" not in scripted_llm.requests[0]
    await collect(client, tools=[READ_SKILL["function"]])
    assert scripted_llm.requests[1]["tools"] == [READ_SKILL]


async def test_tool_call_arguments_are_assembled_across_fragments(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    args = {"name": "deploy-checklist", "section": "rollback", "depth": 3}
    scripted_llm.script(Turn(tool_calls=[("call_1", "read_skill", args)]))
    deltas, [completion] = await collect(make_client(scripted_llm), tools=[READ_SKILL])
    assert deltas == []
    assert completion.finish_reason == "tool_calls"
    assert completion.message.content is None
    [call] = completion.tool_calls
    assert (call.id, call.name) == ("call_1", "read_skill")
    assert call.parse_arguments() == args


async def test_parallel_tool_calls_and_text_arrive_in_one_completion(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(
        Turn(
            text="Let me look.",
            tool_calls=[
                ("call_a", "read_skill", {"name": "a"}),
                ("call_b", "connector", {"subcommand": "discover", "name": "github"}),
                ("call_c", "read_skill", {"name": "c"}),
            ],
        )
    )
    deltas, [completion] = await collect(make_client(scripted_llm), tools=[READ_SKILL])
    assert "".join(deltas) == "Let me look."
    assert completion.message.content == "Let me look."
    assert [(c.id, c.name, c.parse_arguments()) for c in completion.tool_calls] == [
        ("call_a", "read_skill", {"name": "a"}),
        ("call_b", "connector", {"subcommand": "discover", "name": "github"}),
        ("call_c", "read_skill", {"name": "c"}),
    ]


async def test_usage_comes_from_the_final_usage_chunk(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(text="ok", usage=(123, 45)))
    _, [completion] = await collect(make_client(scripted_llm))
    assert completion.usage == Usage(prompt_tokens=123, completion_tokens=45, total_tokens=168)


async def test_malformed_tool_call_json_surfaces_only_in_parse_arguments(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(
        Turn(tool_calls=[("call_1", "read_skill", {})], raw_arguments='{"name": "x",')
    )
    _, [completion] = await collect(make_client(scripted_llm), tools=[READ_SKILL])
    [call] = completion.tool_calls
    assert call.arguments == '{"name": "x",'
    with pytest.raises(ValueError, match="malformed JSON arguments"):
        call.parse_arguments()


async def test_complete_returns_the_completion_and_continues_a_tool_conversation(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(
        Turn(tool_calls=[("call_1", "read_skill", {"name": "x"})]),
        Turn(text="The skill says hello."),
    )
    client = make_client(scripted_llm)
    history = [ChatMessage.user("what does skill x say?")]
    first = await client.complete(history, tools=[READ_SKILL])
    history.append(first.message)
    history.append(ChatMessage.tool("call_1", "hello", name="read_skill"))
    second = await client.complete(history, tools=[READ_SKILL])
    assert second.text == "The skill says hello."
    sent = scripted_llm.requests[1]["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_skill", "arguments": '{"name": "x"}'},
            }
        ],
    }
    assert sent[2] == {
        "role": "tool",
        "content": "hello",
        "tool_call_id": "call_1",
        "name": "read_skill",
    }


async def test_empty_script_answers_done(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    completion = await make_client(scripted_llm).complete([ChatMessage.user("x")], tools=None)
    assert completion.text == "done"


async def test_dynamic_turn_sees_the_request(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(lambda body: Turn(text=f"you said {body['messages'][-1]['content']}"))
    completion = await make_client(scripted_llm).complete([ChatMessage.user("ping")], tools=None)
    assert completion.text == "you said ping"


async def test_json_response_to_a_streaming_request_is_accepted(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    """Some compatible servers ignore `stream: true`; the client still returns a Completion."""
    scripted_llm.script(
        Turn(text="hm", tool_calls=[("c9", "t", {})], usage=(1, 2), ignore_stream=True)
    )
    deltas, [completion] = await collect(make_client(scripted_llm))
    assert deltas == ["hm"]
    assert completion.tool_calls == [ToolCallRequest(id="c9", name="t", arguments="{}")]
    assert completion.usage == Usage(1, 2, 3)


def test_from_settings_uses_llm_settings_and_model_override() -> None:
    settings = Settings(
        llm_base_url="http://127.0.0.1:1/v1/",
        llm_api_key=SecretStr("k"),
        llm_model="m1",
        llm_timeout_s=7,
        llm_max_retries=1,
    )
    client = LlmClient.from_settings(settings, model_override="m2")
    assert (client.base_url, client.model, client.timeout_s, client.max_retries) == (
        "http://127.0.0.1:1/v1",
        "m2",
        7,
        1,
    )
    assert LlmClient.from_settings(settings).model == "m1"


async def test_concurrent_streams_on_one_client_do_not_mix(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    def echo(body: dict[str, Any]) -> Turn:
        return Turn(text=f"echo {body['messages'][-1]['content']} end", token_delay_s=0.01)

    scripted_llm.script(*[echo] * 8)
    client = make_client(scripted_llm)

    async def ask(n: int) -> str:
        deltas, [completion] = await collect(client, messages=[ChatMessage.user(f"q{n}")])
        assert "".join(deltas) == completion.text
        return completion.text

    answers = await asyncio.gather(*(ask(n) for n in range(8)))
    assert answers == [f"echo q{n} end" for n in range(8)]


async def test_own_connections_serve_a_burst_and_are_kept_for_the_next(
    scripted_llm: ScriptedLLM,
) -> None:
    """Without an injected client, a burst of calls gets a connection each, kept for the next
    burst (no new connection then); a caller that stops reading early gives its connection up
    (its answer is unfinished): the next burst opens one in its place."""
    scripted_llm.script(*[Turn(text="one two three four", token_delay_s=0.01)] * 25)
    async with LlmClient(
        base_url=scripted_llm.base_url, api_key=API_KEY, model="m", timeout_s=5, max_retries=0
    ) as client:

        async def ask() -> None:
            async for _ in client.stream_chat([ChatMessage.user("hi")], tools=None):
                pass

        await asyncio.gather(*(ask() for _ in range(8)))
        first = set(scripted_llm.peers)
        await asyncio.gather(*(ask() for _ in range(8)))
        assert len(first) == 8  # eight calls at once, eight connections
        assert set(scripted_llm.peers) == first  # the second burst on the same ones
        stream = client.stream_chat([ChatMessage.user("hi")], tools=None)
        assert isinstance(await anext(stream), TextDelta)
        await stream.aclose()
        early = scripted_llm.peers[-1]
        await asyncio.gather(*(ask() for _ in range(8)))
        last = set(scripted_llm.peers[-8:])
        assert early in first
        assert early not in last
        assert len(last) == 8
        assert len(last - first) == 1
