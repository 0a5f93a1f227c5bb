"""One MCP session: transport selection, the owning task, and safe error text.

The SDK's client context (`async with Client(...)`) opens anyio task groups, so it must be
entered and exited by the same task. `McpSession` runs that context in its own long-lived
asyncio task (independent of any request) and requests are sent from the callers' tasks on the
open session, which the SDK dispatcher supports concurrently.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import posixpath
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client._transport import Transport, TransportStreams
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import (
    MCP_DEFAULT_SSE_READ_TIMEOUT,
    MCP_DEFAULT_TIMEOUT,
    McpHttpClientFactory,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app.mcp.models import McpServer
from app.mcp.watch import watched
from app.security.pinning import StaticPinnedTransport
from app.security.redact import redact_text

logger = logging.getLogger(__name__)

TRANSPORTS = ("stdio", "sse", "streamable_http")
_CLIENT_INFO = types.Implementation(name="quiver", version="0.1.0")
_STREAM_READ_TIMEOUT_S = 3600.0
"""Idle read limit on long-lived event streams (SSE session, change subscription). Calls are
bounded by `call_timeout_s` separately; a stream that times out is reopened lazily."""
_CLOSE_TIMEOUT_S = 10.0
"""Upper bound for a graceful close (stdio shutdown alone may take ~6 s for a stuck child)."""
_RELISTEN_BASE_S = 1.0
_RELISTEN_MAX_S = 60.0
_BACKGROUND: set[asyncio.Task[None]] = set()


class McpConnectError(Exception):
    """The session could not be opened; the message is safe to show (no secrets)."""


class McpConfigError(McpConnectError):
    """The server's configuration is refused (stdio allow-list, transport, egress)."""


class SessionClosed(Exception):
    """The session ended (server exit, dropped stream) before or during a request."""


@dataclass(frozen=True, kw_only=True)
class ServerSpec:
    """The connection-relevant part of an `McpServer` row, detached from the ORM session."""

    name: str
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 20.0
    call_timeout_s: float = 60.0

    @classmethod
    def from_row(cls, server: McpServer) -> ServerSpec:
        return cls(
            name=server.name,
            transport=server.transport,
            command=server.command,
            args=tuple(str(a) for a in (server.args or [])),
            env={str(k): str(v) for k, v in (server.env or {}).items()},
            url=server.url,
            headers={str(k): str(v) for k, v in (server.headers or {}).items()},
            connect_timeout_s=float(server.connect_timeout_s or 20.0),
            call_timeout_s=float(server.call_timeout_s or 60.0),
        )

    @cached_property
    def fingerprint(self) -> str:
        """A digest of everything a live session depends on (a changed row means reconnect)."""
        payload = json.dumps(
            [self.transport, self.command, self.args, self.env, self.url, self.headers],
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def secrets(self) -> list[str]:
        """Values that must never appear in an error message."""
        return [v for v in (*self.env.values(), *self.headers.values()) if len(v) >= 4]


def check_stdio_command(command: str | None, allowed: Sequence[str]) -> None:
    """Refuse a stdio command that is not on the allow-list.

    Matching is exact on the command string as configured: an allow-list entry containing
    `/` matches only that same (normalised) path, and a bare entry such as `uvx` matches only
    the bare command `uvx` (resolved through the child's PATH). A basename match is deliberately
    not accepted: `/tmp/x/uvx` must not pass because `uvx` is allowed.
    """
    if not command:
        raise McpConfigError("stdio transport needs a command")
    if not allowed:
        raise McpConfigError(
            f"stdio MCP servers are disabled (QUIVER_MCP_STDIO_COMMANDS is empty); "
            f"set QUIVER_MCP_STDIO_COMMANDS={command} to allow {command!r}"
        )
    wanted = _normalise_command(command)
    if wanted not in {_normalise_command(entry) for entry in allowed}:
        raise McpConfigError(
            f"stdio command {command!r} is not on the allow-list "
            f"(QUIVER_MCP_STDIO_COMMANDS={','.join(allowed)}); add it to "
            "QUIVER_MCP_STDIO_COMMANDS to allow it"
        )


INSTALL_BIN = Path(sys.executable).parent
"""The running environment's script directory (e.g. `.venv/bin`): servers installed next to
Quiver (`pip install mcp-server-time`) are found there even when it is not on PATH."""


def resolve_stdio_command(command: str, allowed: Sequence[str]) -> str:
    """The executable a stdio command runs: a path as given, a bare name from PATH, else from
    the running environment's script directory. A missing one is a config error naming the
    command, where it was looked for and the allow-list."""
    found = _executable(command)
    if "/" not in found or not (Path(found).is_file() and os.access(found, os.X_OK)):
        where = "" if "/" in command else f" (looked on PATH and in {INSTALL_BIN})"
        raise McpConfigError(
            f"stdio command {command!r} was not found or is not executable{where}; "
            f"allowed: QUIVER_MCP_STDIO_COMMANDS={','.join(allowed)}"
        )
    return found


def _executable(command: str) -> str:
    """`command` itself when it is a path or found nowhere, else the full path it resolves to."""
    if "/" in command:
        return command
    return shutil.which(command) or shutil.which(command, path=str(INSTALL_BIN)) or command


def _normalise_command(command: str) -> str:
    command = command.strip()
    return posixpath.normpath(command) if "/" in command else command


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def describe_error(exc: BaseException, spec: ServerSpec) -> str:
    """A short, secret-free description of a connection or call failure."""
    leaf = _leaf(exc)
    match leaf:
        case MCPError():
            text = leaf.message
        case httpx2.HTTPStatusError():
            text = f"HTTP {leaf.response.status_code} from the server"
        case httpx2.TransportError() | OSError():
            text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
        case _:
            text = f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__
    return redact_text(redact(text, spec.secrets))[:300]


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


Pins = Mapping[str, Sequence[object]]
"""Host name → the addresses the egress guard checked for it (see `pinned_client_factory`)."""


def build_transport(spec: ServerSpec, pins: Pins | None = None) -> Transport:
    """The SDK transport for `spec`; callers check the allow-list and egress first.

    Remote transports connect only to `pins` (what the egress guard checked): the SDK never
    resolves the host again, so DNS rebinding after the check cannot redirect the session.
    """
    match spec.transport:
        case "stdio":
            assert spec.command is not None
            params = StdioServerParameters(
                command=_executable(spec.command), args=list(spec.args), env=spec.env
            )
            # The SDK merges `env` over a fixed safe set (HOME, LOGNAME, PATH, SHELL, TERM, USER),
            # never over the gateway's own environment.
            return cast(Transport, stdio_client(params))
        case "sse":
            assert spec.url is not None
            if pins is None:
                raise McpConfigError("a remote MCP server needs the egress guard's addresses")
            return cast(
                Transport,
                sse_client(
                    spec.url,
                    headers=spec.headers or None,
                    timeout=spec.connect_timeout_s,
                    sse_read_timeout=_STREAM_READ_TIMEOUT_S,
                    httpx_client_factory=pinned_client_factory(pins),
                ),
            )
        case "streamable_http":
            if pins is None:
                raise McpConfigError("a remote MCP server needs the egress guard's addresses")
            return cast(Transport, _streamable_http(spec, pinned_client_factory(pins)))
    raise McpConfigError(f"unknown transport {spec.transport!r}; expected one of {TRANSPORTS}")


_DEFAULT_TIMEOUT = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)


def pinned_client_factory(pins: Pins) -> McpHttpClientFactory:
    """The SDK's client factory, with a transport that connects only to the checked addresses
    (no environment proxies; redirects are left to the SDK, which stays on the origin)."""

    def factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or _DEFAULT_TIMEOUT,
            auth=auth,
            transport=StaticPinnedTransport(pins),
            trust_env=False,
        )

    return factory


@asynccontextmanager
async def _streamable_http(
    spec: ServerSpec, client_factory: McpHttpClientFactory
) -> AsyncIterator[TransportStreams]:
    assert spec.url is not None
    read = max(_STREAM_READ_TIMEOUT_S, spec.call_timeout_s + 10.0)
    timeout = httpx2.Timeout(spec.connect_timeout_s, read=read)
    async with (
        client_factory(headers=spec.headers or None, timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


class McpSession:
    """One open MCP session owned by a dedicated task; see the module docstring."""

    def __init__(self, spec: ServerSpec, *, on_tools_changed: Callable[[], None]) -> None:
        self.spec = spec
        self._on_tools_changed = on_tools_changed
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self.ended = False
        """The server's side of the connection ended (a stdio process exited or was killed)."""

    @classmethod
    async def open(
        cls, spec: ServerSpec, transport: Transport, *, on_tools_changed: Callable[[], None]
    ) -> McpSession:
        """Connect and complete the handshake within `spec.connect_timeout_s`."""
        session = cls(spec, on_tools_changed=on_tools_changed)
        task = asyncio.create_task(session._run(transport), name=f"mcp-session:{spec.name}")
        session._task = task
        _BACKGROUND.add(task)
        task.add_done_callback(_BACKGROUND.discard)
        try:
            async with asyncio.timeout(spec.connect_timeout_s):
                await session._ready.wait()
        except TimeoutError:
            await session.aclose(cancel=True)
            raise McpConnectError(
                f"connect to MCP server {spec.name!r} timed out after {spec.connect_timeout_s:g}s"
            ) from None
        except BaseException:
            task.cancel()
            raise
        if session._client is None:
            detail = describe_error(session._error, spec) if session._error else "session ended"
            await session.aclose()
            raise McpConnectError(f"cannot connect to MCP server {spec.name!r}: {detail}")
        return session

    @property
    def alive(self) -> bool:
        task = self._task
        return self._client is not None and task is not None and not task.done() and not self.ended

    @property
    def protocol_version(self) -> str | None:
        return self._client.protocol_version if self._client is not None else None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Invoke `name`; raises `SessionClosed`, `MCPError` or transport errors."""
        return await self._live().call_tool(name, arguments)

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """`resources/read` (a resource link one of the server's tools returned)."""
        return await self._live().read_resource(uri, cache_mode="bypass")

    async def list_tools(self) -> list[types.Tool]:
        """Every page of `tools/list`, bypassing the SDK's response cache."""
        client = self._live()
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(100):
            page = await client.list_tools(cursor=cursor, cache_mode="bypass")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def aclose(self, *, cancel: bool = False) -> None:
        """Stop the owning task and wait (bounded) for the transport to shut down.

        `cancel` interrupts a handshake still in progress (the task is not yet waiting to stop).
        """
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if cancel:
            task.cancel()
        _done, pending = await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT_S)
        if pending:
            task.cancel()

    def _live(self) -> Client:
        if not self.alive or self._client is None:
            raise SessionClosed(f"session to MCP server {self.spec.name!r} is closed")
        return self._client

    async def _run(self, transport: Transport) -> None:
        try:
            async with Client(
                watched(transport, self._connection_ended),
                mode="auto",
                cache=None,
                client_info=_CLIENT_INFO,
                message_handler=self._on_message,
            ) as client:
                self._client = client
                self._ready.set()
                modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
                async with anyio.create_task_group() as tg:
                    if modern:
                        tg.start_soon(self._listen, client)
                    await self._stop.wait()
                    tg.cancel_scope.cancel()
        except Exception as exc:
            self._error = exc
            logger.info("MCP session %r ended: %s", self.spec.name, describe_error(exc, self.spec))
        finally:
            self._client = None
            self._ready.set()

    def _connection_ended(self) -> None:
        """Calls in flight fail (the SDK wakes them); the session winds down at once."""
        if not self._stop.is_set():
            logger.info("MCP server %r closed the connection", self.spec.name)
        self.ended = True
        self._stop.set()

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._on_tools_changed()
        elif isinstance(message, Exception):
            logger.debug("MCP server %r stream error: %s", self.spec.name, type(message).__name__)

    async def _listen(self, client: Client) -> None:
        """2026-era servers announce tool-list changes on a `subscriptions/listen` stream.

        A lost stream is re-opened (with backoff) and followed by a refresh, since events are
        not replayed; the loop ends with the session or when the server does not support it.
        """
        delay, reopened = _RELISTEN_BASE_S, False
        while not self._stop.is_set():
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    delay = _RELISTEN_BASE_S
                    if reopened:
                        self._on_tools_changed()
                    async for _event in subscription:
                        self._on_tools_changed()
            except ListenNotSupportedError:
                return
            except MCPError as exc:
                if exc.code in (types.CONNECTION_CLOSED, types.METHOD_NOT_FOUND):
                    return
                logger.info(
                    "MCP server %r: tool-list subscription failed: %s",
                    self.spec.name,
                    describe_error(exc, self.spec),
                )
            except Exception as exc:
                logger.info(
                    "MCP server %r: tool-list subscription lost: %s",
                    self.spec.name,
                    describe_error(exc, self.spec),
                )
            reopened = True
            await anyio.sleep(delay)
            delay = min(delay * 2, _RELISTEN_MAX_S)
