"""`LiveStreamResponse` (app/chat/sse.py): a run's live stream sends its headers and first
events from the request's own task, the rest as `StreamingResponse` does, and still stops when
the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.types import Message

from app.chat.sse import LiveStreamResponse

SCOPE: dict[str, Any] = {
    "type": "http",
    "asgi": {"version": "3.0", "spec_version": "2.3"},
    "method": "POST",
    "path": "/api/v1/chat",
    "headers": [],
}


class Client:
    """The server side of one connection: what was sent, from which task; a disconnect on
    demand."""

    def __init__(self, *, notify_after: int = 0) -> None:
        self.sent: list[tuple[Message, asyncio.Task[Any] | None]] = []
        self.gone = asyncio.Event()
        self.bodies_sent = asyncio.Event()
        self._notify_after = notify_after

    async def send(self, message: Message) -> None:
        self.sent.append((message, asyncio.current_task()))
        if self._notify_after and len(self.bodies()) >= self._notify_after:
            self.bodies_sent.set()

    async def receive(self) -> Message:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    def bodies(self) -> list[bytes]:
        return [m["body"] for m, _ in self.sent if m["type"] == "http.response.body"]


async def frames(*items: bytes | str, then_wait: asyncio.Event | None = None) -> AsyncIterator[Any]:
    for item in items:
        yield item
        await asyncio.sleep(0)
    if then_wait is not None:
        await then_wait.wait()


async def test_the_start_and_first_chunk_go_out_from_the_requests_task() -> None:
    client = Client()
    response = LiveStreamResponse(frames(b"one", "two", b"three"), media_type="text/event-stream")
    await response(SCOPE, client.receive, client.send)
    me = asyncio.current_task()
    (start, start_task), (first, first_task) = client.sent[:2]
    assert (start["type"], start["status"]) == ("http.response.start", 200)
    assert (first["body"], first["more_body"]) == (b"one", True)
    assert (start_task, first_task) == (me, me)
    assert client.bodies() == [b"one", b"two", b"three", b""]  # a str chunk is encoded
    assert client.sent[-1][0]["more_body"] is False
    assert sum(m["type"] == "http.response.start" for m, _ in client.sent) == 1


async def test_an_empty_stream_ends_at_once() -> None:
    client = Client()
    await LiveStreamResponse(frames(), media_type="text/event-stream")(
        SCOPE, client.receive, client.send
    )
    assert [m["type"] for m, _ in client.sent] == ["http.response.start", "http.response.body"]
    assert client.bodies() == [b""]


async def test_a_client_that_goes_away_stops_the_rest_of_the_stream() -> None:
    client = Client(notify_after=2)
    never = asyncio.Event()  # the stream would wait for more forever
    response = LiveStreamResponse(frames(b"one", b"two", then_wait=never))
    serving = asyncio.create_task(response(SCOPE, client.receive, client.send))
    await asyncio.wait_for(client.bodies_sent.wait(), 5)
    client.gone.set()
    await asyncio.wait_for(serving, 5)
    assert client.bodies() == [b"one", b"two"]
