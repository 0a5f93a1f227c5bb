"""Notice at once that an MCP server's connection ended (a stdio process exited or was killed).

The SDK fails the requests in flight when the server's stream ends, but the client object
stays open, so a session looks alive until something is sent on it. `watched` wraps a
transport's read stream and calls `on_end` the moment it ends: the session is then known dead,
the next call reconnects instead of failing, and a call that was in flight fails at once with
a typed error (see `McpPool.call`) instead of being retried.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, cast

import anyio
from mcp.client._transport import Transport, TransportStreams


class _WatchedRead:
    """A read stream that reports its end (EOF, or closed under the reader) once."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def watched(transport: Transport, on_end: Callable[[], None]) -> Transport:
    """`transport`, whose read stream calls `on_end` when the server's side ends."""

    @asynccontextmanager
    async def wrapper() -> AsyncIterator[TransportStreams]:
        async with transport as (read, write):
            yield cast(Any, _WatchedRead(read, on_end)), write

    return cast(Transport, wrapper())
