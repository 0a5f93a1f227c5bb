"""Connection pinning: an httpx transport that connects only where the egress guard said.

`guarded_request` resolves and checks a host, then sends inside `pinned(host, port, ip)`;
the transport's network backend reads that context variable and opens the TCP connection to
the checked IP. The URL keeps the host name, so the Host header, TLS SNI, certificate
verification and the connection pool all work by name, as without the guard.

The MCP SDK speaks `httpx2` (a separate copy of httpx/httpcore) and sends from its own tasks
for the life of a session, so remote MCP servers get `StaticPinnedTransport` instead: the
addresses the guard checked when the session was opened are fixed in the transport, and every
connection the SDK opens (the event stream, each POST, a reconnect) goes to one of them.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, Generic, TypeVar

import httpcore
import httpcore2
import httpx
import httpx2

SslVerify = ssl.SSLContext | bool

_Stream = TypeVar("_Stream")

_PINS: ContextVar[Mapping[tuple[str, int], str] | None] = ContextVar("egress_pins", default=None)


@contextlib.contextmanager
def pinned(host: str, port: int, address: object) -> Iterator[None]:
    token = _PINS.set({(host, port): str(address)})
    try:
        yield
    finally:
        _PINS.reset(token)


class _GuardedBackend(Generic[_Stream]):
    """What both pinned backends share: TCP only to the addresses `_addresses` allows (each
    tried in turn, the last connect error raised), never a unix socket."""

    _inner: Any  # httpcore's or httpcore2's AnyIOBackend (the same class, two copies)
    _connect_error: type[Exception]

    def _addresses(self, host: str, port: int) -> Sequence[str]:
        raise NotImplementedError

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        last: Exception | None = None
        for address in self._addresses(host, port):
            try:
                stream: _Stream = await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
                return stream
            except self._connect_error as exc:
                last = exc
        assert last is not None
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> _Stream:
        raise self._connect_error("unix sockets are not allowed by the egress guard")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedBackend(_GuardedBackend[httpcore.AsyncNetworkStream], httpcore.AsyncNetworkBackend):
    """Connects only to the address the guard pinned for the current request."""

    _connect_error = httpcore.ConnectError

    def __init__(self, *, strict: bool) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._strict = strict

    def _addresses(self, host: str, port: int) -> Sequence[str]:
        address = (_PINS.get() or {}).get((host.lower(), port))
        if address is None:
            if self._strict:
                raise httpcore.ConnectError(f"{host}:{port} was not checked by the egress guard")
            address = host  # a trusted caller (e.g. the LLM client) outside guarded_request
        return (address,)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose guarded requests connect only to the pinned address.

    `strict=True` also refuses any request that did not come through `guarded_request`;
    `strict=False` lets such requests resolve normally, so one client can serve both tool
    traffic (guarded) and trusted configured endpoints such as the LLM.
    """

    def __init__(
        self, *, verify: SslVerify = True, limits: httpx.Limits | None = None, strict: bool = True
    ) -> None:
        super().__init__(verify=verify, trust_env=False)
        limits = limits or httpx.Limits(max_connections=200, max_keepalive_connections=50)
        # Same pool httpx builds, with our network backend (httpx has no public knob for it).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_PinnedBackend(strict=strict),
        )


def is_pinned_client(client: httpx.AsyncClient) -> bool:
    # httpx exposes no public accessor for a client's transport
    return isinstance(getattr(client, "_transport", None), PinnedTransport)


class _StaticPinnedBackend(
    _GuardedBackend[httpcore2.AsyncNetworkStream], httpcore2.AsyncNetworkBackend
):
    """Connects a host name only to the addresses checked for it; refuses any other host."""

    _connect_error = httpcore2.ConnectError

    def __init__(self, pins: Mapping[str, Sequence[object]]) -> None:
        self._inner = httpcore2.AnyIOBackend()
        self._pins = {
            _host_key(host): tuple(str(a) for a in addresses) for host, addresses in pins.items()
        }

    def _addresses(self, host: str, port: int) -> Sequence[str]:
        addresses = self._pins.get(_host_key(host))
        if not addresses:
            raise httpcore2.ConnectError(f"{host}:{port} was not checked by the egress guard")
        return addresses


def _host_key(host: str) -> str:
    return host.lower().rstrip(".").removeprefix("[").removesuffix("]")


class StaticPinnedTransport(httpx2.AsyncHTTPTransport):
    """An httpx2 transport that connects each host only to the addresses pinned for it.

    `pins` maps a host name (as in the URL) to the addresses the egress guard checked; the
    port is not part of the key, so a same-host redirect (http to https) stays pinned too.
    Environment proxies are never used (a proxy would connect by name).
    """

    def __init__(self, pins: Mapping[str, Sequence[object]], *, verify: SslVerify = True) -> None:
        super().__init__(verify=verify, trust_env=False)
        limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(verify=verify, trust_env=False),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_StaticPinnedBackend(pins),
        )
