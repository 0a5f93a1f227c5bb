"""RunEvent → SSE frame (`id:` / `event:` / `data:`), with the same adapter as the journal."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from app.events import RunEvent, event_payload

PING = b": ping\n\n"


def frame(seq: int, kind: str, data: dict[str, Any]) -> bytes:
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"id: {seq}\nevent: {kind}\ndata: {body}\n\n".encode()


def event_frame(seq: int, event: RunEvent) -> bytes:
    return frame(seq, event.kind, event_payload(event))


class LiveStreamResponse(StreamingResponse):
    """A started run's SSE stream (`POST /chat`, the OpenAI door): the headers and the first
    events go out in the request's own task, the rest as `StreamingResponse` sends them (its
    task that listens for the client going away included).

    `StreamingResponse` sends from a task of a task group it opens first, one loop turn after
    the request's task gets there: tens of ms in a burst of starts, on the way to every run's
    first event and so to its model call, which waits for that event to be sent
    (docs/benchmarks.md, "Side by side IV").
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        iterator = self.body_iterator = aiter(self.body_iterator)
        try:
            first = await anext(iterator)
        except StopAsyncIteration:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({"type": "http.response.body", "body": self._bytes(first), "more_body": True})
        await super().__call__(scope, receive, send)

    async def stream_response(self, send: Send) -> None:
        """What is left of the stream (`__call__` sent its start and first chunk)."""
        async for chunk in self.body_iterator:
            await send(
                {"type": "http.response.body", "body": self._bytes(chunk), "more_body": True}
            )
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _bytes(self, chunk: str | bytes | memoryview) -> bytes | memoryview:
        """A chunk as `StreamingResponse` sends it: text in the response's charset."""
        return chunk.encode(self.charset) if isinstance(chunk, str) else chunk
