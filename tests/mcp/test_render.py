"""Rendering MCP tool results into the observation string the model reads."""

from __future__ import annotations

import base64
import json

import mcp_types as types

from app.mcp.render import render_call_result


def _result(
    *content: object, structured: object = None, error: bool = False
) -> types.CallToolResult:
    return types.CallToolResult(
        content=list(content),  # type: ignore[arg-type]
        structured_content=structured,
        is_error=error,
    )


def test_text_parts_are_joined_in_order() -> None:
    result = render_call_result(
        _result(
            types.TextContent(type="text", text="one"), types.TextContent(type="text", text="two")
        ),
        step="mcp:s/t",
    )
    assert result.ok
    assert result.output == "one\ntwo"
    assert result.step == "mcp:s/t"


def test_structured_content_is_json_when_no_text_mirrors_it() -> None:
    result = render_call_result(_result(structured={"temp": 21.5, "unit": "C"}))
    assert json.loads(result.output) == {"temp": 21.5, "unit": "C"}


def test_structured_content_is_not_repeated_next_to_its_text_form() -> None:
    text = types.TextContent(type="text", text='{"n": 1}')
    result = render_call_result(_result(text, structured={"n": 1}))
    assert result.output == '{"n": 1}'


def test_images_and_audio_are_summarised_with_their_size() -> None:
    png = base64.b64encode(b"\x89PNG" + b"\x00" * 96).decode()
    wav = base64.b64encode(b"RIFF" + b"\x00" * 1020).decode()
    result = render_call_result(
        _result(
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.AudioContent(type="audio", data=wav, mime_type="audio/wav"),
        )
    )
    assert result.output == "[image/png: 100 bytes]\n[audio/wav: 1024 bytes]"
    assert png not in result.output


def test_resources_are_summarised() -> None:
    blob = base64.b64encode(b"x" * 2048).decode()
    result = render_call_result(
        _result(
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(
                    uri="file:///notes.md", mime_type="text/markdown", text="# Notes"
                ),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///a.bin", mime_type="application/zip", blob=blob
                ),
            ),
            types.ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv"),
        )
    )
    lines = result.output.splitlines()
    assert lines[0] == "[resource file:///notes.md (text/markdown)]"
    assert lines[1] == "# Notes"
    assert lines[2] == "[resource file:///a.bin: application/zip, 2048 bytes]"
    assert lines[3] == "[resource link: file:///big.csv (big.csv)]"


def test_is_error_becomes_a_failed_tool_result() -> None:
    result = render_call_result(
        _result(types.TextContent(type="text", text="repository not found"), error=True),
        step="mcp:gh/get_repo",
    )
    assert not result.ok
    assert result.error == "repository not found"
    assert result.text == "Error: repository not found"
    assert result.step == "mcp:gh/get_repo"


def test_empty_results_say_so() -> None:
    assert render_call_result(_result()).output == "(no output)"
    assert render_call_result(_result(error=True)).error == (
        "the tool reported an error without detail"
    )


def test_long_output_is_truncated_with_a_hint() -> None:
    items = [{"id": i, "title": f"issue {i}"} for i in range(200)]
    text = types.TextContent(type="text", text=json.dumps(items))
    result = render_call_result(_result(text), max_chars=4000)
    assert len(result.output) <= 4000
    assert "showing 10/200 items" in result.output
    assert "keys: id, title" in result.output

    plain = types.TextContent(type="text", text="word " * 5000)
    cut = render_call_result(_result(plain), max_chars=1000)
    assert len(cut.output) < 1100  # the cap plus the hint line
    assert cut.output.endswith("[Truncated: 25000 chars total]")
