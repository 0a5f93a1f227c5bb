"""Connection pinning: an httpx transport that connects only where the egress guard said.

`guarded_request` resolves and checks a host, then sends inside `pinned(host, port, ip)`;
the transport's network backend reads that context variable and opens the TCP connection to
the checked IP. The URL keeps the host name, so the Host header, TLS SNI, certificate
verification and the connection pool all work by name, as without the guard.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

SslVerify = ssl.SSLContext | bool

_PINS: ContextVar[Mapping[tuple[str, int], str] | None] = ContextVar("egress_pins", default=None)


@contextlib.contextmanager
def pinned(host: str, port: int, address: object) -> Iterator[None]:
    token = _PINS.set({(host, port): str(address)})
    try:
        yield
    finally:
        _PINS.reset(token)


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to the address the guard pinned for the current request."""

    def __init__(self, *, strict: bool) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._strict = strict

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = (_PINS.get() or {}).get((host.lower(), port))
        if address is None:
            if self._strict:
                raise httpcore.ConnectError(f"{host}:{port} was not checked by the egress guard")
            address = host  # a trusted caller (e.g. the LLM client) outside guarded_request
        return await self._inner.connect_tcp(
            address, port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not allowed by the egress guard")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """An httpx transport whose guarded requests connect only to the pinned address.

    `strict=True` also refuses any request that did not come through `guarded_request`;
    `strict=False` lets such requests resolve normally, so one client can serve both tool
    traffic (guarded) and trusted configured endpoints such as the LLM.
    """

    def __init__(self, *, verify: SslVerify = True,
                 limits: httpx.Limits | None = None, strict: bool = True) -> None:
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
