"""The scripted server must speak the exact OpenAI wire format, or the client tests prove little."""

import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.scripted_llm import ScriptedLLM, Turn

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
async def llm_http() -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client for raw requests to the scripted server (not the model client)."""
    async with httpx.AsyncClient() as http:
        yield http


async def raw_stream(http: httpx.AsyncClient, server: ScriptedLLM, **body: Any) -> list[str]:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    payload.update(body)
    url = f"{server.base_url}/chat/completions"
    async with http.stream("POST", url, json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [line async for line in response.aiter_lines() if line]


def decode(lines: list[str]) -> list[dict[str, Any]]:
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


async def test_stream_uses_openai_chunk_objects_with_usage_last(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    scripted_llm.script(Turn(text="a b", usage=(7, 2)))
    chunks = decode(
        await raw_stream(llm_http, scripted_llm, stream_options={"include_usage": True})
    )
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["a", " b"]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    assert all(c["usage"] is None for c in chunks[:-1])


async def test_stream_without_include_usage_has_no_usage_chunk(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    chunks = decode(await raw_stream(llm_http, scripted_llm))
    assert all("usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


async def test_tool_call_head_then_argument_fragments(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    args = {"subcommand": "discover", "name": "github"}
    scripted_llm.script(Turn(tool_calls=[("call_1", "connector", args), ("call_2", "t", {})]))
    chunks = decode(await raw_stream(llm_http, scripted_llm))
    calls = [
        c["choices"][0]["delta"]["tool_calls"][0]
        for c in chunks
        if "tool_calls" in c["choices"][0]["delta"]
    ]
    head = calls[0]
    assert head == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "connector", "arguments": ""},
    }
    fragments = [c["function"]["arguments"] for c in calls[1:] if c["index"] == 0]
    assert len(fragments) >= 3
    assert all(set(c) == {"index", "function"} for c in calls[1:] if c["index"] == 0)
    assert json.loads("".join(fragments)) == args
    assert any(c.get("id") == "call_2" and c["index"] == 1 for c in calls)
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_non_streaming_request_gets_a_chat_completion(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    scripted_llm.script(Turn(text="hi", tool_calls=[("c1", "t", {"a": 1})]))
    response = await llm_http.post(
        f"{scripted_llm.base_url}/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
    )
    body = response.json()
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "hi"
    assert choice["message"]["tool_calls"][0]["function"] == {"name": "t", "arguments": '{"a": 1}'}
    assert body["usage"]["total_tokens"] == (
        body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )


async def test_error_turn_returns_status_openai_error_body_and_headers(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    scripted_llm.script(Turn(status=429, error_message="slow down", headers={"Retry-After": "2"}))
    response = await llm_http.post(f"{scripted_llm.base_url}/chat/completions", json={})
    assert response.status_code == 429
    assert response.headers["retry-after"] == "2"
    assert response.json()["error"]["message"] == "slow down"
    assert response.json()["error"]["type"] == "rate_limit_error"


async def test_requests_are_recorded_and_script_is_consumed_in_order(
    scripted_llm: ScriptedLLM, llm_http: httpx.AsyncClient
) -> None:
    scripted_llm.script(Turn(text="first"), Turn(text="second"))
    url = f"{scripted_llm.base_url}/chat/completions"
    texts = []
    for n in range(3):
        response = await llm_http.post(url, json={"messages": [], "n": n})
        texts.append(response.json()["choices"][0]["message"]["content"])
    assert texts == ["first", "second", "done"]
    assert [r["n"] for r in scripted_llm.requests] == [0, 1, 2]
    assert scripted_llm.pending == 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("inherited_sigint", ["default", "ignored"])
def test_cli_serves_a_looping_reply_until_interrupted(inherited_sigint: str) -> None:
    """`ignored`: how a background job (`cmd &` in a script, CI) starts the server."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "tests.fixtures.scripted_llm",
        "--port",
        str(port),
        "--reply",
        "bench reply",
    ]
    if inherited_sigint == "ignored":
        command = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *command]
    with subprocess.Popen(
        command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        try:
            deadline = time.monotonic() + 20
            texts: list[str] = []
            with httpx.Client() as http:
                while len(texts) < 2:
                    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                    assert time.monotonic() < deadline, "CLI server did not come up"
                    try:
                        response = http.post(
                            f"http://127.0.0.1:{port}/v1/chat/completions", json={"messages": []}
                        )
                    except httpx.ConnectError:
                        time.sleep(0.05)
                        continue
                    texts.append(response.json()["choices"][0]["message"]["content"])
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)
                pytest.fail("the server ignored SIGINT")
    assert texts == ["bench reply", "bench reply"]
    assert proc.returncode == 0
