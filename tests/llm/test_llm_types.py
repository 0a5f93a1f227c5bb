import pytest

from app.llm.types import ChatMessage, Completion, ToolCallRequest, Usage


def test_tool_call_parse_arguments_returns_object() -> None:
    call = ToolCallRequest(id="c1", name="read_skill", arguments='{"name": "x", "n": 2}')
    assert call.parse_arguments() == {"name": "x", "n": 2}


def test_tool_call_empty_arguments_parse_as_empty_object() -> None:
    assert ToolCallRequest(id="c1", name="t", arguments="  ").parse_arguments() == {}


def test_tool_call_malformed_json_raises_clear_value_error() -> None:
    call = ToolCallRequest(id="c1", name="read_skill", arguments='{"name": "x"')
    with pytest.raises(ValueError, match=r"'read_skill'.*malformed JSON arguments"):
        call.parse_arguments()


def test_tool_call_non_object_json_raises_value_error() -> None:
    call = ToolCallRequest(id="c1", name="t", arguments="[1, 2]")
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        call.parse_arguments()


def test_assistant_tool_call_message_round_trips_through_openai_shape() -> None:
    message = ChatMessage.assistant(
        None, [ToolCallRequest(id="c1", name="t", arguments='{"a": 1}')]
    )
    wire = message.to_openai()
    assert wire == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": '{"a": 1}'}}
        ],
    }
    assert ChatMessage.from_openai(wire) == message


def test_tool_message_carries_call_id_and_name() -> None:
    wire = ChatMessage.tool("c1", "result", name="t").to_openai()
    assert wire == {"role": "tool", "content": "result", "tool_call_id": "c1", "name": "t"}
    assert ChatMessage.from_openai(wire).tool_call_id == "c1"


def test_from_openai_joins_text_content_parts_and_rejects_unknown_roles() -> None:
    text_parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    parts = {"role": "user", "content": text_parts}
    assert ChatMessage.from_openai(parts).content == "ab"
    with pytest.raises(ValueError, match="unknown message role 'robot'"):
        ChatMessage.from_openai({"role": "robot", "content": "x"})


def test_usage_adds_fieldwise() -> None:
    total = Usage(1, 2, 3) + Usage(10, 20, 30)
    assert total == Usage(prompt_tokens=11, completion_tokens=22, total_tokens=33)
    assert total.to_dict() == {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}


def test_usage_from_openai_fills_missing_total() -> None:
    assert Usage.from_openai({"prompt_tokens": 4, "completion_tokens": 5}).total_tokens == 9
    assert Usage.from_openai(None) == Usage()


def test_completion_exposes_text_and_tool_calls() -> None:
    call = ToolCallRequest(id="c", name="t", arguments="{}")
    completion = Completion(message=ChatMessage.assistant("hi", [call]), finish_reason="tool_calls")
    assert completion.text == "hi"
    assert completion.tool_calls == [call]
