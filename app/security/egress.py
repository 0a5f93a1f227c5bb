"""Outbound HTTP guard shared by connectors and the built-in `http_fetch` (docs/contract.md §7.1).

Why it is built this way:

* Every address a host resolves to is checked, and the request then connects to *that*
  address, with no second DNS lookup (so DNS rebinding between check and connect cannot
  happen). With a client from `new_http_client()` (a `PinnedTransport`), the URL keeps its
  host name — Host header, SNI, certificate check and connection pool all use the name —
  and the transport's network backend connects to the IP pinned for this request (a
  context variable); it refuses any connect that was not pinned. With any other client the
  URL is rewritten to the IP (Host header and `sni_hostname` keep the name) and HTTPS
  connections are not kept alive, because httpcore pools by IP and would otherwise reuse
  a TLS session verified for one name for another.
* Redirects are followed here (never by httpx), and every hop goes through the same check;
  credentials are stripped when a redirect leaves the origin.
* Denied by default: private, loopback, link-local, CGNAT, multicast, reserved, unspecified,
  IPv4-mapped/compatible IPv6, NAT64, 6to4/Teredo embedding a non-public IPv4, cloud metadata
  addresses and names, non-canonical IPv4 spellings (`127.1`, `0x7f000001`, `2130706433`),
  non-http(s) schemes and URLs carrying userinfo. `Settings.egress_allow_cidrs` opens ranges;
  a metadata address is only opened by listing exactly that address (`169.254.169.254/32`).

How a caller (e.g. `http_fetch`) uses it::

    guard = EgressGuard(settings)
    try:
        resp = await guarded_request(
            http, guard, "GET", url, timeout=settings.http_timeout_s,
            max_bytes=settings.http_max_response_bytes,
        )
    except FetchError as exc:          # EgressBlocked, HostNotFound, RequestTimeout, ...
        return ToolResult.fail(str(exc), retryable=exc.retryable)
    text = resp.text()                  # resp.status_code, resp.headers, resp.truncated

The shared `httpx.AsyncClient` may be any client (see `new_http_client`); requests are built
without the client's cookies and never follow redirects inside httpx.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.config import Settings
from app.security.addresses import (
    METADATA_ADDRESSES,
    Address,
    Network,
    blocked_reason,
    show_address,
)
from app.security.pinning import PinnedTransport, SslVerify, is_pinned_client, pinned

_METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
_CHARSET = re.compile(r"charset=[\"']?([\w.:-]+)", re.IGNORECASE)
_HOSTNAME = re.compile(r"[a-z0-9_.-]+")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ALWAYS_STRIPPED = ("authorization", "proxy-authorization", "cookie")
_BODY_HEADERS = ("content-type", "content-length", "transfer-encoding")
USER_AGENT = "Quiver/0.1 (egress-guarded)"


class FetchError(Exception):
    """An outbound request could not be made or completed; `str()` is safe to show the model."""

    retryable = False


class EgressBlocked(FetchError):
    """The destination is not allowed."""


class HostNotFound(FetchError):
    retryable = True


class ConnectFailed(FetchError):
    retryable = True


class RequestTimeout(FetchError):
    retryable = True

    def __init__(self, phase: str, seconds: float) -> None:
        super().__init__(f"Timed out after {seconds:g}s ({phase})")
        self.phase = phase


class TooManyRedirects(FetchError):
    pass


class UpstreamProtocolError(FetchError):
    retryable = True


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    connect: float
    read: float
    total: float

    @classmethod
    def coerce(cls, value: float | Timeouts) -> Timeouts:
        if isinstance(value, Timeouts):
            return value
        return cls(connect=min(10.0, value), read=value, total=value)

    def for_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect, read=self.read, write=self.read, pool=self.connect
        )


@dataclass(frozen=True, kw_only=True)
class ResolvedTarget:
    """A URL whose host was resolved and whose every address passed the guard."""

    url: httpx.URL
    host: str
    port: int
    addresses: tuple[Address, ...]
    is_literal: bool

    def pinned_url(self, address: Address) -> httpx.URL:
        return self.url.copy_with(host=str(address), port=self.port)


@dataclass(frozen=True, kw_only=True)
class GuardedResponse:
    status_code: int
    reason: str
    headers: httpx.Headers
    body: bytes
    truncated: bool
    final_url: str
    redirects: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        found = _CHARSET.search(self.headers.get("content-type", ""))
        charset = found.group(1) if found else "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def display_url(url: httpx.URL) -> str:
    """The URL without userinfo, query or fragment (they may carry secrets)."""
    host = url.raw_host.decode("ascii", errors="replace")
    if ":" in host:
        host = f"[{host}]"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{host}{port}{url.raw_path.decode('ascii', 'replace').split('?')[0]}"


def allow_hint(address: Address, reason: str) -> str:
    """How an operator allows a private destination (never suggested for cloud metadata)."""
    if reason == "cloud metadata":
        return ""
    shown = show_address(address)
    return f"; to allow it, add {shown}/{address.max_prefixlen} to QUIVER_EGRESS_ALLOW_CIDRS"


class EgressGuard:
    """Decides whether a URL may be fetched; resolves it once for the connect."""

    def __init__(self, settings: Settings) -> None:
        self._allowed: tuple[Network, ...] = tuple(
            ipaddress.ip_network(cidr, strict=False) for cidr in settings.egress_allow_cidrs
        )

    def is_allowed(self, address: Address) -> bool:
        if address in METADATA_ADDRESSES:
            return any(net.num_addresses == 1 and address in net for net in self._allowed)
        return any(net.version == address.version and address in net for net in self._allowed)

    def check_address(self, address: Address, *, url: str) -> None:
        reason = blocked_reason(address)
        if reason and not self.is_allowed(address):
            raise EgressBlocked(
                f"Egress blocked: {show_address(address)} ({reason}) is not an allowed destination "
                f"for {url}{allow_hint(address, reason)}"
            )

    async def check_url(self, url: str | httpx.URL) -> ResolvedTarget:
        """Parse, resolve and check `url`; raise `EgressBlocked`/`HostNotFound` otherwise."""
        parsed = _parse(url)
        shown = display_url(parsed)
        host = parsed.raw_host.decode("ascii").lower()
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        literal = _literal_address(host, shown)
        if literal is not None:
            self.check_address(literal, url=shown)
            if str(literal) != host:
                raise EgressBlocked(
                    f"Egress blocked: {host!r} is a non-canonical spelling of {literal}; "
                    f"write the address in standard form ({shown})"
                )
            return ResolvedTarget(
                url=parsed, host=host, port=port, addresses=(literal,), is_literal=True
            )
        name = host.rstrip(".")
        if name in _METADATA_HOSTS:
            raise EgressBlocked(
                f"Egress blocked: {name} (cloud metadata) is not an allowed destination for {shown}"
            )
        addresses = await _resolve(name, port, shown)
        for address in addresses:
            self.check_address(address, url=shown)
        return ResolvedTarget(
            url=parsed, host=name, port=port, addresses=addresses, is_literal=False
        )


def _parse(url: str | httpx.URL) -> httpx.URL:
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise EgressBlocked(f"Egress blocked: invalid URL ({exc})") from exc
    if parsed.scheme not in ("http", "https"):
        scheme = parsed.scheme or "(none)"
        raise EgressBlocked(f"Egress blocked: scheme {scheme!r} is not allowed (http/https only)")
    if parsed.userinfo:
        raise EgressBlocked(
            "Egress blocked: URLs with embedded credentials (user@host) are not allowed"
        )
    if not parsed.raw_host:
        raise EgressBlocked("Egress blocked: URL has no host")
    return parsed


def _literal_address(host: str, shown: str) -> Address | None:
    """The IP address a host string spells, in any form a resolver would accept."""
    if ":" in host:
        if "%" in host:
            raise EgressBlocked(f"Egress blocked: scoped IPv6 addresses are not allowed ({shown})")
        try:
            return ipaddress.IPv6Address(host)
        except ValueError as exc:
            raise EgressBlocked(f"Egress blocked: malformed IPv6 address in {shown}") from exc
    if not _HOSTNAME.fullmatch(host):
        raise EgressBlocked(f"Egress blocked: invalid host name {host!r}")
    labels = host.rstrip(".").split(".")
    if not _NUMERIC_LABEL.fullmatch(labels[-1]):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host.rstrip(".")))
    except OSError as exc:
        raise EgressBlocked(f"Egress blocked: malformed IPv4 address {host!r}") from exc


async def _resolve(host: str, port: int, shown: str) -> tuple[Address, ...]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise HostNotFound(f"Cannot resolve host {host!r} ({shown})") from exc
    found: dict[Address, None] = {}
    for *_, sockaddr in infos:
        found[ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])] = None
    if not found:
        raise HostNotFound(f"Cannot resolve host {host!r} ({shown})")
    return tuple(found)


def new_http_client(
    settings: Settings, *, verify: SslVerify = True, strict: bool = True
) -> httpx.AsyncClient:
    """The client to share: pinned connects, no env proxies, no redirects inside httpx.

    `strict=False` when the same client also calls trusted endpoints (the LLM) directly.
    """
    return httpx.AsyncClient(
        transport=PinnedTransport(verify=verify, strict=strict),
        follow_redirects=False,
        trust_env=False,
        timeout=Timeouts.coerce(settings.http_timeout_s).for_httpx(),
    )


async def guarded_request(
    client: httpx.AsyncClient,
    guard: EgressGuard,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, Any] | None = None,
    json: Any = None,
    content: bytes | str | None = None,
    timeout: float | Timeouts,  # noqa: ASYNC109 - split into connect/read/total below
    max_bytes: int,
    max_redirects: int = 5,
    strip_on_redirect: Iterable[str] = (),
) -> GuardedResponse:
    """Send a request through the egress guard, following up to `max_redirects` checked hops."""
    timeouts = Timeouts.coerce(timeout)
    try:
        request = httpx.Request(
            method.upper(), url, headers=headers, params=params, json=json, content=content
        )
    except httpx.InvalidURL as exc:
        raise EgressBlocked(f"Egress blocked: invalid URL ({exc})") from exc
    request.headers.setdefault("User-Agent", USER_AGENT)
    sensitive = {*_ALWAYS_STRIPPED, *(h.lower() for h in strip_on_redirect)}
    try:
        async with asyncio.timeout(timeouts.total):
            return await _follow(
                client, guard, request, timeouts, max_bytes, max_redirects, sensitive
            )
    except TimeoutError as exc:
        raise RequestTimeout("total", timeouts.total) from exc


async def _follow(
    client: httpx.AsyncClient,
    guard: EgressGuard,
    request: httpx.Request,
    timeouts: Timeouts,
    max_bytes: int,
    max_redirects: int,
    sensitive: set[str],
) -> GuardedResponse:
    for hop in range(max_redirects + 1):
        target = await guard.check_url(request.url)
        response = await _send_pinned(client, request, target, timeouts)
        location = response.headers.get("location")
        if response.status_code in _REDIRECTS and location:
            await response.aclose()
            if hop == max_redirects:
                shown = display_url(request.url)
                raise TooManyRedirects(f"Too many redirects (over {max_redirects}) from {shown}")
            request = _redirect(request, response.status_code, location, sensitive)
            continue
        body, truncated = await _read_capped(response, max_bytes, timeouts)
        return GuardedResponse(
            status_code=response.status_code,
            reason=response.reason_phrase,
            headers=response.headers,
            body=body,
            truncated=truncated,
            final_url=str(request.url),
            redirects=hop,
        )
    raise AssertionError("unreachable")  # pragma: no cover - loop always returns or raises


def _for_address(
    request: httpx.Request, target: ResolvedTarget, address: Address, *, pinned_client: bool
) -> httpx.Request:
    if pinned_client:
        return request  # the transport connects to the pinned address itself
    extensions: dict[str, Any] = {"timeout": request.extensions["timeout"]}
    headers = httpx.Headers(request.headers)
    url = target.pinned_url(address)
    if target.url.scheme == "https" and not target.is_literal:
        extensions["sni_hostname"] = target.host
        headers["Connection"] = "close"  # pooled by IP: never reuse across names
    return httpx.Request(
        request.method, url, headers=headers, content=request.content, extensions=extensions
    )


async def _send_pinned(
    client: httpx.AsyncClient, request: httpx.Request, target: ResolvedTarget, timeouts: Timeouts
) -> httpx.Response:
    request.extensions["timeout"] = timeouts.for_httpx().as_dict()
    pinned_client = is_pinned_client(client)
    last: Exception | None = None
    for address in target.addresses:
        outgoing = _for_address(request, target, address, pinned_client=pinned_client)
        try:
            with pinned(request.url.raw_host.decode("ascii").lower(), target.port, address):
                return await client.send(outgoing, stream=True, follow_redirects=False)
        except httpx.ConnectTimeout as exc:
            raise RequestTimeout("connect", timeouts.connect) from exc
        except httpx.ConnectError as exc:
            last = exc
        except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout) as exc:
            phase = type(exc).__name__.removesuffix("Timeout").lower()
            raise RequestTimeout(phase, timeouts.read) from exc
        except httpx.TransportError as exc:
            raise UpstreamProtocolError(
                f"{type(exc).__name__} talking to {display_url(request.url)}"
            ) from exc
    raise ConnectFailed(f"Cannot connect to {display_url(request.url)} ({last})")


def _redirect(
    request: httpx.Request, status: int, location: str, sensitive: set[str]
) -> httpx.Request:
    try:
        url = request.url.join(location)
    except httpx.InvalidURL as exc:
        raise EgressBlocked(f"Egress blocked: invalid redirect location ({exc})") from exc
    method = request.method
    content: bytes | None = request.content
    headers = httpx.Headers(request.headers)
    if (status == 303 and method != "HEAD") or (status in (301, 302) and method == "POST"):
        method, content = "GET", None
        for name in _BODY_HEADERS:
            headers.pop(name, None)
    if (url.scheme, url.host, url.port) != (request.url.scheme, request.url.host, request.url.port):
        for name in sensitive:
            headers.pop(name, None)
    headers.pop("host", None)
    return httpx.Request(method, url, headers=headers, content=content)


async def _read_capped(
    response: httpx.Response, max_bytes: int, timeouts: Timeouts
) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    truncated = False
    try:
        async for chunk in response.aiter_bytes():
            room = max_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
    except httpx.ReadTimeout as exc:
        raise RequestTimeout("read", timeouts.read) from exc
    except httpx.TransportError as exc:
        raise UpstreamProtocolError(f"{type(exc).__name__} while reading the response") from exc
    finally:
        await response.aclose()
    return b"".join(chunks), truncated
