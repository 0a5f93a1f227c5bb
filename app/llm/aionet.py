"""The model calls' network layer: httpcore's HTTP/1.1 over plain asyncio transports.

httpcore's default backend reads through anyio: every read of a streamed answer enters a cancel
scope (`fail_after`) and anyio's socket stream. A model streams one chunk per token, so that
per-read machinery was a quarter of a chat run's CPU (docs/benchmarks.md, "Side by side").
Here a read takes what an `asyncio.Protocol` has buffered; only a read that has to wait arms a
timer, for its timeout. HTTP itself (h11, keep-alive, the pool) stays httpcore's; TLS is
asyncio's (`loop.start_tls`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterable
from typing import Any, cast

import httpcore
import httpx
from httpcore import AsyncNetworkBackend, AsyncNetworkStream

_HIGH_WATER = 256 * 1024
"""Buffered bytes above which the socket is not read until the caller catches up."""


def _settle(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Buffered(asyncio.Protocol):
    """What the socket delivered, until a read takes it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.reading: asyncio.Future[None] | None = None
        self.draining: asyncio.Future[None] | None = None
        self.write_paused = False
        self.read_paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio's: typed, not checked.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
            self.read_paused = True
        _settle(self.reading)

    def eof_received(self) -> bool:
        self.eof = True
        _settle(self.reading)
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        _settle(self.reading)
        _settle(self.draining)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        _settle(self.draining)

    def take(self, max_bytes: int) -> bytes:
        data = bytes(self.buffer[:max_bytes])
        del self.buffer[:max_bytes]
        if self.read_paused and len(self.buffer) <= _HIGH_WATER // 2 and self.transport:
            self.read_paused = False
            self.transport.resume_reading()
        return data


async def _wait(protocol: _Buffered, limit_s: float | None, *, drain: bool) -> None:
    """Until the protocol settles this wait (data, EOF, drained), or `limit_s` passes."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    if drain:
        protocol.draining = waiter
    else:
        protocol.reading = waiter
    timer = None if limit_s is None else loop.call_later(limit_s, _expire, waiter)
    try:
        await waiter
    finally:
        if timer is not None:
            timer.cancel()
        if drain:
            protocol.draining = None
        else:
            protocol.reading = None


class AsyncioStream(AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Buffered) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            try:
                await _wait(protocol, timeout, drain=False)
            except TimeoutError:
                raise httpcore.ReadTimeout("timed out reading from the model endpoint") from None
        if protocol.buffer:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        if self._transport.is_closing() or self._protocol.eof:
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        if self._protocol.write_paused:
            try:
                await _wait(self._protocol, timeout, drain=True)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing to the model endpoint") from None
            if self._protocol.error is not None:
                raise httpcore.WriteError(str(self._protocol.error))

    async def aclose(self) -> None:
        # At once, without waiting for a TLS peer's close_notify (anyio's backend does the
        # same): the connection is done with, nothing is left to send on it.
        self._transport.abort()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
                )
        except TimeoutError:
            self._transport.abort()
            raise httpcore.ConnectTimeout("TLS handshake timed out") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        if transport is None:  # the connection was closed during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport  # flow control on the TLS layer from now on
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":  # an idle connection with data or EOF: the server closed it
            return bool(self._protocol.buffer) or self._protocol.eof
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None


class AsyncioBackend(AsyncNetworkBackend):
    """httpcore's network backend on asyncio transports (see the module doc)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = (local_address, 0) if local_address else None
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Buffered, host, port, local_addr=local
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return _stream(transport, protocol, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _stream(
    transport: asyncio.BaseTransport,
    protocol: asyncio.BaseProtocol,
    socket_options: Iterable[Any] | None,
) -> AsyncioStream:
    assert isinstance(protocol, _Buffered)
    sock: socket.socket | None = transport.get_extra_info("socket")
    if sock is not None:
        for option in socket_options or ():
            sock.setsockopt(*option)
    return AsyncioStream(cast(asyncio.Transport, transport), protocol)


def http_transport(*, tls: ssl.SSLContext, limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose connection pool reads through `AsyncioBackend` (no proxies,
    no environment: the model endpoint is configuration)."""
    transport = httpx.AsyncHTTPTransport(verify=tls, limits=limits, trust_env=False)
    # httpx takes no network backend: the same pool it would build, with this one.
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls,
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=AsyncioBackend(),
    )
    return transport
