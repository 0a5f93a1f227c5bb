import asyncio
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from multidict import CIMultiDict

from app.llm.client import LlmClient, LlmError
from app.llm.errors import retry_after
from app.llm.types import ChatMessage, TextDelta
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.llm.conftest import API_KEY, ClientFactory

HELLO = [ChatMessage.user("hello")]


async def drain_text(client: LlmClient, seen: list[str]) -> None:
    """Consume a stream that must fail before its Completion, keeping the text seen."""
    async for item in client.stream_chat(HELLO, tools=None):
        assert isinstance(item, TextDelta)
        seen.append(item.text)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_retries_a_500_then_succeeds(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(status=500), Turn(status=503), Turn(text="recovered"))
    completion = await make_client(scripted_llm, max_retries=2).complete(HELLO, tools=None)
    assert completion.text == "recovered"
    assert len(scripted_llm.requests) == 3


async def test_gives_up_after_max_retries_with_the_http_status_code(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(*[Turn(status=502, error_message="bad gateway")] * 3)
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm, max_retries=2).complete(HELLO, tools=None)
    assert info.value.code == "llm_http_502"
    assert info.value.status_code == 502
    assert "bad gateway" in info.value.message
    assert len(scripted_llm.requests) == 3


async def test_client_errors_are_not_retried(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(status=400, error_message="context_length_exceeded"))
    with pytest.raises(LlmError) as info:
        await make_client(scripted_llm).complete(HELLO, tools=None)
    assert info.value.code == "llm_http_400"
    assert len(scripted_llm.requests) == 1


async def test_429_waits_for_retry_after_then_succeeds(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(status=429, headers={"Retry-After": "0.3"}), Turn(text="ok"))
    client = make_client(scripted_llm, backoff_base_s=0.0, backoff_max_s=0.0)
    started = time.perf_counter()
    completion = await client.complete(HELLO, tools=None)
    assert completion.text == "ok"
    assert time.perf_counter() - started >= 0.3
    assert len(scripted_llm.requests) == 2


async def test_429_with_a_long_retry_after_fails_fast(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(status=429, headers={"Retry-After": "600"}), Turn(text="ok"))
    client = make_client(scripted_llm, retry_after_max_s=5)
    started = time.perf_counter()
    with pytest.raises(LlmError) as info:
        await client.complete(HELLO, tools=None)
    assert info.value.code == "llm_http_429"
    assert info.value.retry_after_s == 600
    assert time.perf_counter() - started < 2
    assert len(scripted_llm.requests) == 1


async def test_connect_error_to_a_closed_port_raises_after_retries(
    make_client: ClientFactory,
) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=3)
    with pytest.raises(LlmError) as info:
        await client.complete(HELLO, tools=None)
    assert info.value.code == "llm_unavailable"
    assert "cannot reach the model endpoint 127.0.0.1:" in info.value.message


async def test_slow_first_byte_times_out_and_is_retried(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(delay_s=1.0, text="late"), Turn(text="on time"))
    client = make_client(scripted_llm, timeout_s=0.3, max_retries=1)
    completion = await client.complete(HELLO, tools=None)
    assert completion.text == "on time"
    assert len(scripted_llm.requests) == 2


async def test_timeout_after_retries_raises_llm_timeout(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(*[Turn(delay_s=1.0)] * 2)
    client = make_client(scripted_llm, timeout_s=0.2, max_retries=1)
    started = time.perf_counter()
    with pytest.raises(LlmError) as info:
        await client.complete(HELLO, tools=None)
    assert info.value.code == "llm_timeout"
    assert time.perf_counter() - started < 0.9


async def test_stall_after_text_started_raises_timeout_without_retry(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(text="one two three four", stall_after_chunks=3, stall_s=1.0))
    client = make_client(scripted_llm, timeout_s=0.3, max_retries=3)
    seen: list[str] = []
    with pytest.raises(LlmError) as info:
        await drain_text(client, seen)
    assert info.value.code == "llm_timeout"
    assert seen == ["one", " two"]
    assert len(scripted_llm.requests) == 1


async def test_connection_dropped_mid_text_raises_without_retry(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    scripted_llm.script(Turn(text="alpha beta gamma delta", drop_after_chunks=3), Turn(text="x"))
    client = make_client(scripted_llm, max_retries=3)
    seen: list[str] = []
    with pytest.raises(LlmError) as info:
        await drain_text(client, seen)
    assert info.value.code == "llm_unavailable"
    assert "".join(seen) == "alpha beta"
    assert len(scripted_llm.requests) == 1


async def test_connection_dropped_before_any_delta_is_retried(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    """A tool-call-only turn yields nothing until the end, so a cut stream is safe to retry."""
    scripted_llm.script(
        Turn(
            tool_calls=[("call_1", "read_skill", {"name": "a long skill name"})],
            drop_after_chunks=3,
        ),
        Turn(tool_calls=[("call_2", "read_skill", {"name": "b"})]),
    )
    completion = await make_client(scripted_llm).complete(HELLO, tools=None)
    assert [c.id for c in completion.tool_calls] == ["call_2"]
    assert len(scripted_llm.requests) == 2


async def test_api_key_never_appears_in_error_messages(
    scripted_llm_factory: object, make_client: ClientFactory
) -> None:
    server = await scripted_llm_factory(require_api_key="the-right-key")  # type: ignore[operator]
    with pytest.raises(LlmError) as info:
        await make_client(server).complete(HELLO, tools=None)
    assert info.value.code == "llm_http_401"
    assert "Incorrect API key provided" in info.value.message
    assert API_KEY in server.request_headers[0]["authorization"]
    assert API_KEY not in str(info.value)
    assert API_KEY not in repr(info.value.args)


async def test_api_key_never_appears_in_retry_logs_or_unavailable_errors(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client(base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=1)
    with pytest.raises(LlmError) as info:
        await client.complete(HELLO, tools=None)
    assert "retry 1/1" in caplog.text
    assert API_KEY not in caplog.text
    assert API_KEY not in str(info.value)


def test_retry_after_accepts_seconds_milliseconds_and_http_dates() -> None:

    assert retry_after(CIMultiDict({"Retry-After": "1.5"})) == 1.5
    assert retry_after(CIMultiDict({"retry-after-ms": "250", "Retry-After": "9"})) == 0.25
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (retry_after(CIMultiDict({"Retry-After": future})) or 0) <= 30
    assert retry_after(CIMultiDict({"Retry-After": "soon"})) is None
    assert retry_after(CIMultiDict()) is None


async def test_a_caller_holding_a_delta_past_the_deadline_gets_a_timeout_next(
    scripted_llm: ScriptedLLM, make_client: ClientFactory
) -> None:
    """One deadline per call: it also ends a call whose reader lingered between reads, and
    leaves the caller's task with no cancellation pending."""
    scripted_llm.script(Turn(text="one two three four", stall_after_chunks=3, stall_s=0.3))
    client = make_client(scripted_llm, timeout_s=0.2, max_retries=3)
    items = client.stream_chat(HELLO, tools=None)
    first = await anext(items)
    assert isinstance(first, TextDelta)
    await asyncio.sleep(0.3)  # past the deadline while holding the first delta
    with pytest.raises(LlmError) as info:
        async for _ in items:
            pass
    assert info.value.code == "llm_timeout"
    assert len(scripted_llm.requests) == 1
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
