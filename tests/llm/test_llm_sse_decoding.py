"""Edge cases of the event-stream wire format, sent byte-for-byte by the scripted server."""

import json
from typing import Any

import pytest

from app.llm.client import LlmError
from app.llm.stream import SseDecoder
from app.llm.types import ChatMessage, TextDelta
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.llm.conftest import API_KEY, ClientFactory

HELLO = [ChatMessage.user("hello")]


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return json.dumps(body)


async def test_comments_crlf_and_split_network_reads_are_decoded(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    first = f"data: {chunk({'content': 'Hel'})}\r\n\r\n"
    scripted_llm.script(
        Turn(
            raw_body=[
                ": ping\n\n",
                first[:10],
                first[10:],
                "event: message\nid: 7\n",
                f"data:{chunk({'content': 'lo'})}\n\n",
                f"data: {chunk({}, 'stop')}\n\ndata: [DONE]\n\n",
            ]
        )
    )
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.text == "Hello"
    assert completion.finish_reason == "stop"


async def test_a_character_split_between_two_reads_is_decoded_whole(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    """UTF-8 is decoded across reads: "é" is two bytes, here sent 50 ms apart."""
    raw = json.dumps(json.loads(chunk({"content": "Olé, ça va"})), ensure_ascii=False)
    event = f"data: {raw}\n\n".encode()
    cut = event.index("é".encode()) + 1
    scripted_llm.script(
        Turn(
            raw_body=[event[:cut], event[cut:], f"data: {chunk({}, 'stop')}\n\ndata: [DONE]\n\n"],
            raw_piece_delay_s=0.05,
        )
    )
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.text == "Olé, ça va"


async def test_multi_line_data_is_joined_into_one_event(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    pretty = json.dumps(json.loads(chunk({"content": "multi"})), indent=1).split("\n")
    event = "".join(f"data: {line}\n" for line in pretty) + "\n"
    scripted_llm.script(Turn(raw_body=[event, f"data: {chunk({}, 'stop')}\n\n", "data: [DONE]"]))
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.text == "multi"


async def test_tool_calls_without_index_and_unicode_arguments(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    """Some servers send whole calls without `index`; U+2028 inside JSON must not split lines."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "t", "arguments": '{"q": "a\u2028b é"}'},
    }
    body = json.dumps(
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]},
        ensure_ascii=False,
    )
    scripted_llm.script(Turn(raw_body=[f"data: {body}\n\n", "data: [DONE]\n\n"]))
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.tool_calls[0].parse_arguments() == {"q": "a\u2028b é"}


async def test_stream_without_done_but_with_finish_reason_completes(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(raw_body=[f"data: {chunk({'content': 'ok'}, 'stop')}\n\n"]))
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.text == "ok"


async def test_stream_cut_before_finish_is_retried_then_reported(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    cut = Turn(raw_body=[f"data: {chunk({'role': 'assistant'})}\n\n"])
    scripted_llm.script(cut, cut)
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm, max_retries=1).complete(HELLO, tools=None)
    assert info.value.code == "llm_unavailable"
    assert "ended before the response was complete" in info.value.message
    assert len(scripted_llm.requests) == 2


async def test_undecodable_chunk_is_a_bad_response_not_retried(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(raw_body=["data: {not json\n\n"]))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert info.value.code == "llm_bad_response"
    assert len(scripted_llm.requests) == 1


async def test_error_object_inside_the_stream_is_an_upstream_error(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    error = json.dumps({"error": {"message": "model overloaded", "type": "server_error"}})
    scripted_llm.script(Turn(raw_body=[f"data: {error}\n\n"]))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert info.value.code == "llm_upstream_error"
    assert info.value.message == "model overloaded"


async def test_tool_call_without_a_name_is_a_bad_response(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    nameless = chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": "{}"}}]})
    scripted_llm.script(Turn(raw_body=[f"data: {nameless}\n\n", "data: [DONE]\n\n"]))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert info.value.code == "llm_bad_response"
    assert "without a function name" in info.value.message


async def test_missing_usage_leaves_zeros(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(
        Turn(raw_body=[f"data: {chunk({'content': 'x'}, 'stop')}\n\n", "data: [DONE]\n\n"])
    )
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert completion.usage.to_dict() == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
    }


async def test_consumer_stopping_early_closes_the_stream_cleanly(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(text="one two three four five", token_delay_s=0.05))
    client = make_client(scripted_llm)
    stream = client.stream_chat(HELLO, tools=None)
    first = await anext(stream)
    await stream.aclose()
    assert first == TextDelta("one")
    again = await client.complete(HELLO, tools=None)
    assert again.text == "done"


def test_sse_decoder_handles_split_lines_multi_data_and_unterminated_tail() -> None:
    decoder = SseDecoder()
    assert decoder.feed("data: a") == []
    assert decoder.feed("bc\r\n") == []
    assert decoder.feed("data:def\n\n: comment\nevent: x\n\ndata: [DONE]") == ["abc\ndef"]
    assert decoder.flush() == ["[DONE]"]
    assert decoder.flush() == []


async def test_html_page_is_a_bad_response_not_retried(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(raw_body=["<html>login</html>"], raw_media_type="text/html"))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert info.value.code == "llm_bad_response"
    assert "HTML page" in info.value.message
    assert len(scripted_llm.requests) == 1


async def test_key_is_redacted_before_the_error_detail_is_truncated(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    message = "x" * 290 + f" key {API_KEY} rejected"
    scripted_llm.script(Turn(status=401, error_message=message))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert API_KEY[:6] not in info.value.message
    assert " key ***" in info.value.message[-10:]
