"""The model calls' network layer (`app/llm/transport.py`): aiohttp's client, against the
scripted model served over plain HTTP and over TLS."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import uvloop

from app.llm.client import LlmClient, LlmError
from app.llm.transport import NETWORK_ERRORS, model_session, network_failure
from app.llm.types import ChatMessage, Completion, TextDelta
from tests.fixtures.scripted_llm import ScriptedLLM, Turn
from tests.fixtures.threaded_server import ThreadedServer
from tests.fixtures.tls import self_signed

TEXT = "one two three four five six"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return self_signed(tmp_path_factory.mktemp("model-transport"))


@pytest.fixture
def tls_llm(cert: tuple[str, str]) -> Iterator[tuple[ScriptedLLM, str]]:
    """The scripted model behind TLS: (its script, its https base URL by name)."""
    llm = ScriptedLLM(token_delay_s=0.002)
    server = ThreadedServer("tls-llm")
    server.start(llm.app(), ssl_certfile=cert[0], ssl_keyfile=cert[1])
    yield llm, f"https://localhost:{server.port}/v1"
    server.stop()


@pytest.fixture
async def client(
    cert: tuple[str, str], tls_llm: tuple[ScriptedLLM, str]
) -> AsyncIterator[aiohttp.ClientSession]:
    """A model session trusting the test certificate (closed before the TLS server stops)."""
    tls = ssl.create_default_context(cafile=cert[0])
    async with model_session(tls=tls) as session:
        yield session


async def chat(session: aiohttp.ClientSession, base_url: str) -> tuple[str, Completion]:
    llm = LlmClient(
        base_url=base_url, api_key="k", model="m", timeout_s=5, max_retries=0, session=session
    )
    text, completion = "", None
    async for item in llm.stream_chat([ChatMessage.user("hi")], tools=None):
        if isinstance(item, TextDelta):
            text += item.text
        else:
            completion = item
    assert completion is not None
    return text, completion


async def test_streams_over_plain_http_and_tls_reusing_the_connection(
    client: aiohttp.ClientSession, scripted_llm: ScriptedLLM, tls_llm: tuple[ScriptedLLM, str]
) -> None:
    secure, secure_url = tls_llm
    for server, url in ((scripted_llm, scripted_llm.base_url), (secure, secure_url)):
        server.script(Turn(text=TEXT), Turn(text=TEXT))
        for _ in range(2):
            text, completion = await chat(client, url)
            assert (text, completion.text, completion.finish_reason) == (TEXT, TEXT, "stop")
    assert len(secure.requests) == 2


async def test_a_certificate_the_client_does_not_trust_fails_the_connect(
    tls_llm: tuple[ScriptedLLM, str],
) -> None:
    _, url = tls_llm
    tls = ssl.create_default_context()  # the system's CAs only
    async with model_session(tls=tls) as session:
        with pytest.raises(NETWORK_ERRORS, match="CERTIFICATE_VERIFY_FAILED") as raised:
            await session.get(f"{url}/models")
    assert network_failure(raised.value)[0] == "connect"


async def test_a_closed_port_is_a_connect_error(client: aiohttp.ClientSession) -> None:
    with pytest.raises(NETWORK_ERRORS) as raised:
        await client.get("http://127.0.0.1:9/v1/models")
    assert network_failure(raised.value)[0] == "connect"


async def test_a_read_that_waits_past_its_timeout_raises_read_timeout(
    client: aiohttp.ClientSession, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Turn(text=TEXT, stall_after_chunks=2, stall_s=2.0))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    url = f"{scripted_llm.base_url}/chat/completions"
    timeout = aiohttp.ClientTimeout(sock_read=0.2)
    async with client.post(url, json=body, timeout=timeout) as r:
        with pytest.raises(NETWORK_ERRORS) as raised:
            await r.read()
    assert network_failure(raised.value)[0] == "timeout"


async def test_a_connection_cut_mid_stream_is_an_error_and_the_next_call_reconnects(
    client: aiohttp.ClientSession, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Turn(text=TEXT, drop_after_chunks=3), Turn(text=TEXT))
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    url = f"{scripted_llm.base_url}/chat/completions"
    async with client.post(url, json=body) as r:
        with pytest.raises(NETWORK_ERRORS) as raised:
            await r.read()
    assert network_failure(raised.value)[0] == "lost"
    assert (await chat(client, scripted_llm.base_url))[0] == TEXT


async def test_a_server_that_hangs_up_before_answering_lost_the_connection() -> None:
    """Not a timeout: it is retried as `llm_unavailable`, with the aiohttp error's name."""

    async def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with model_session() as session:
            with pytest.raises(NETWORK_ERRORS) as raised:
                await session.get(f"http://127.0.0.1:{port}/v1/models")
            llm = LlmClient(
                base_url=f"http://127.0.0.1:{port}/v1",
                api_key="k",
                model="m",
                timeout_s=5,
                max_retries=0,
                session=session,
            )
            with pytest.raises(LlmError) as failed:
                await llm.complete([ChatMessage.user("hi")], tools=None)
    finally:
        server.close()
        await server.wait_closed()
    assert network_failure(raised.value)[0] == "lost"  # disconnected or reset, as it happens
    assert failed.value.code == "llm_unavailable"
    assert failed.value.retryable
    assert "lost the connection" in failed.value.message


async def test_a_kept_connection_the_server_closed_is_not_reused() -> None:
    server = ScriptedLLM(default_turn=Turn(text=TEXT))
    tls = ssl.create_default_context()
    async with model_session(tls=tls) as session:
        await asyncio.to_thread(server.start)
        port = server.port
        try:
            assert (await chat(session, server.base_url))[0] == TEXT
        finally:
            await asyncio.to_thread(server.stop)  # closes the kept connection
        restarted = ScriptedLLM(default_turn=Turn(text="again"), port=port)
        await asyncio.to_thread(restarted.start)
        try:
            assert (await chat(session, restarted.base_url))[0] == "again"
        finally:
            await asyncio.to_thread(restarted.stop)


async def test_bodies_larger_than_the_socket_buffers_go_both_ways(
    client: aiohttp.ClientSession, scripted_llm: ScriptedLLM, tls_llm: tuple[ScriptedLLM, str]
) -> None:
    """Reads pause the socket while their buffer is full and resume as they take it; a body
    over `LARGE_BODY_BYTES` is written in pieces."""
    big = "x" * 3_000_000
    secure, secure_url = tls_llm
    for server, url in ((scripted_llm, scripted_llm.base_url), (secure, secure_url)):
        server.script(Turn(text=big, ignore_stream=True))
        llm = LlmClient(
            base_url=url, api_key="k", model="m", timeout_s=20, max_retries=0, session=client
        )
        completion = await llm.complete([ChatMessage.user(big)], tools=None)
        assert completion.text == big
        assert server.requests[-1]["messages"][0]["content"] == big


def test_streams_over_tls_on_uvloop(
    cert: tuple[str, str], tls_llm: tuple[ScriptedLLM, str]
) -> None:
    """`quiver serve` runs on uvloop, whose transports are not asyncio's classes."""
    server, url = tls_llm
    server.script(Turn(text=TEXT), Turn(text=TEXT))

    async def twice() -> list[str]:
        tls = ssl.create_default_context(cafile=cert[0])
        async with model_session(tls=tls) as session:
            return [(await chat(session, url))[0] for _ in range(2)]

    assert uvloop.run(twice()) == [TEXT, TEXT]


async def test_the_model_client_opens_and_closes_a_session_of_its_own(
    scripted_llm: ScriptedLLM,
) -> None:
    """Without a session given, the client makes one on its first call and closes it."""
    scripted_llm.script(Turn(text=TEXT))
    llm = LlmClient(
        base_url=scripted_llm.base_url, api_key=None, model="m", timeout_s=5, max_retries=0
    )
    async with llm:
        assert (await llm.complete([ChatMessage.user("hi")], tools=None)).text == TEXT
        session = llm._client()
        assert isinstance(session, aiohttp.ClientSession)
        assert not session.closed
    assert session.closed
