"""The endpoint's streamable-HTTP transport: a call answered by its result alone is plain JSON.

A client that posts a request accepts both `application/json` and `text/event-stream`, and the
server picks (MCP streamable HTTP, "Sending Messages to the Server"). The SDK's transport always
opens an SSE stream, which costs a task group of four tasks, two memory streams and three writes
to the socket per call. This one waits for the first message the request's stream carries: when
it is the response itself (almost every call) it is sent as one JSON body; when it is anything
else first — a `notifications/tools/list_changed` after `request_tools`, progress, an
elicitation asking a person for an approval — the answer becomes the SDK's SSE stream, that
message first, exactly as before. So does a call still running after `JSON_WAIT_S`: its
client gets the stream's headers then, as it always did at once, and the rest as it comes.
Everything else (initialize, notifications, batches, errors, resumable streams) is the SDK's own
handling.

A request answered here may have its answer held (`answer_after`): a `tools/call` returns as
soon as its events are queued to the journal, and its answer goes out once they are committed —
the SDK turns the result into its message while the commit is in flight instead of after it.
When the commit fails, the client gets an internal error in the result's place. A request the
SDK answers itself is not held: its handler waits for the commit before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
from http import HTTPStatus
from typing import Any

import anyio
import pydantic_core
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.streamable_http import (
    CONTENT_TYPE_SSE,
    MCP_SESSION_ID_HEADER,
    REQUEST_STREAM_BUFFER_SIZE,
    EventMessage,
    StreamableHTTPServerTransport,
    check_accept_headers,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

JSON_WAIT_S = 1.0
"""How long a request's answer may wait to be sent as JSON; after that it streams (SSE)."""
_OPEN = EventMessage(JSONRPCNotification(jsonrpc="2.0", method="quiver/open-stream"))
"""Put on a request's stream when `JSON_WAIT_S` has passed: never sent, it opens the stream."""
_HELD = "quiver_answer_after"
"""The request's scope state: what its answer waits for (`answer_after`)."""
NOT_STORED = "the call ran, but its events could not be stored: its result is withheld"


async def answer_after(request: object, stored: asyncio.Future[Any]) -> None:
    """Hold the request's answer, and whatever its stream carries from now on, until `stored`
    is done. When this transport does not answer the request (the SDK does), wait for it here
    instead, and fail the call as the transport would: never with the database's text."""
    held = request.scope.get("state", {}).get(_HELD) if isinstance(request, Request) else None
    if held is not None:
        held.append(stored)
        return
    try:
        await asyncio.shield(stored)
    except Exception:
        raise MCPError(INTERNAL_ERROR, NOT_STORED) from None


class _Hold:
    """What a request's answer waits for; `failed` once any of it failed."""

    def __init__(self, request: Request) -> None:
        self.waits: list[asyncio.Future[Any]] = []
        self.failed = False
        request.scope.setdefault("state", {})[_HELD] = self.waits

    async def settle(self) -> None:
        while self.waits:
            waited = self.waits.pop(0)
            try:
                await asyncio.shield(waited)
            except Exception:  # the journal logged it; the client hears an error instead
                self.failed = True

    def answer(self, event: EventMessage) -> EventMessage:
        """`event`, or an internal error in its place if it answers and a wait failed."""
        if not self.failed or not _answers(event):
            return event
        message = event.message
        assert isinstance(message, JSONRPCResponse | JSONRPCError)
        error = ErrorData(code=INTERNAL_ERROR, message=NOT_STORED)
        return EventMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error))


class AnswerFirstTransport(StreamableHTTPServerTransport):
    """`StreamableHTTPServerTransport` whose request POSTs answer JSON unless the request's
    stream carries something before its response (see the module docstring)."""

    async def _handle_post_request(
        self, scope: Scope, request: Request, receive: Receive, send: Send
    ) -> None:
        message = await self._plain_request(request)
        if message is None:  # the SDK's handling, unchanged (the body is read once: cached)
            await super()._handle_post_request(scope, request, receive, send)
            return
        if not await self._validate_request_headers(request, send):
            return
        writer = self._read_stream_writer
        assert writer is not None  # `_plain_request` checked it
        request_id = str(message.id)
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        sender, reader = anyio.create_memory_object_stream[EventMessage](REQUEST_STREAM_BUFFER_SIZE)
        self._request_streams[request_id] = (sender, reader)
        # No cancellation of `receive` (a message handed over as it is cancelled is lost): after
        # the wait, a marker on the same stream wakes the reader instead.
        timer = asyncio.get_running_loop().call_later(JSON_WAIT_S, _open_stream, sender)
        hold = _Hold(request)
        try:
            await writer.send(self._create_session_message(message, request, request_id, version))
            first = await reader.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):  # the session ended meanwhile
            await self._clean_up_memory_streams(request_id)
            failed = self._create_error_response(
                "Session terminated before the request completed",
                HTTPStatus.INTERNAL_SERVER_ERROR,
                INTERNAL_ERROR,
            )
            await failed(scope, receive, send)
            return
        finally:
            timer.cancel()
        if _answers(first):
            await self._clean_up_memory_streams(request_id)
            answer = self._create_json_response(first.message)  # while the commit runs
            await hold.settle()
            if hold.failed:
                answer = self._create_json_response(hold.answer(first).message)
            await answer(scope, receive, send)
            return
        await self._stream(scope, receive, send, request_id, first, hold)

    async def _plain_request(self, request: Request) -> JSONRPCRequest | None:
        """The request, when this POST is one JSON-RPC request (not `initialize`) from a client
        that takes either answer; None leaves the POST to the SDK."""
        if self._read_stream_writer is None or self._event_store is not None:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse) or not self._check_content_type(request):
            return None
        try:
            raw = pydantic_core.from_json(await request.body())
            message = jsonrpc_message_adapter.validate_python(raw, by_name=False)
        except (ValueError, ValidationError):
            return None
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            return None
        return message

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request_id: str,
        first: EventMessage,
        hold: _Hold,
    ) -> None:
        """The SDK's SSE answer: `first` (unless it is the marker) as the stream's opening
        event, then the request's messages up to its response."""
        sse_writer, sse_reader = anyio.create_memory_object_stream[dict[str, Any]](0)
        self._sse_stream_writers[request_id] = sse_writer
        reader = self._request_streams[request_id][1]

        async def forward() -> None:
            try:
                async with sse_writer, reader:
                    if first is not _OPEN:
                        await hold.settle()
                        await sse_writer.send(self._create_event_data(hold.answer(first)))
                    async for event in reader:
                        if event is _OPEN:
                            continue
                        await hold.settle()
                        await sse_writer.send(self._create_event_data(hold.answer(event)))
                        if _answers(event):
                            break
            except anyio.ClosedResourceError:  # the session ended
                pass
            finally:
                self._sse_stream_writers.pop(request_id, None)
                await self._clean_up_memory_streams(request_id)

        headers = {
            "Cache-Control": "no-cache, no-transform",
            "Connection": "keep-alive",
            "Content-Type": CONTENT_TYPE_SSE,
            **({MCP_SESSION_ID_HEADER: self.mcp_session_id} if self.mcp_session_id else {}),
        }
        response = EventSourceResponse(
            content=sse_reader, data_sender_callable=forward, headers=headers
        )
        try:
            await response(scope, receive, send)
        finally:
            await sse_writer.aclose()
            await sse_reader.aclose()


def _answers(event: EventMessage) -> bool:
    return isinstance(event.message, JSONRPCResponse | JSONRPCError)


def _open_stream(sender: MemoryObjectSendStream[EventMessage]) -> None:
    with contextlib.suppress(
        anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError
    ):
        sender.send_nowait(_OPEN)
