"""The MCP session pool (docs/contract.md §7.3), owned by the app lifespan.

One long-lived session per server per process, opened lazily and reused across requests and
runs. Connects are serialised per server (two racing callers share one connect) and run
concurrently across servers. A broken session is reconnected once and the call retried; a
server that cannot be reached is retried with exponential backoff, and calls in between fail
fast with an error observation for that server's tools only.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from app.config import Settings
from app.convert.plain import plain_text
from app.errors import Invalid, Unavailable, Upstream
from app.mcp.client import (
    McpConfigError,
    McpConnectError,
    McpSession,
    Pins,
    ServerSpec,
    build_transport,
    check_stdio_command,
    describe_error,
    resolve_stdio_command,
)
from app.mcp.models import McpServer
from app.mcp.render import render_call_result
from app.security.egress import EgressGuard, FetchError
from app.tools.base import CallContext, ToolResult

logger = logging.getLogger(__name__)

ToolsChangedHook = Callable[[uuid.UUID, list[dict[str, Any]]], Awaitable[None]]


@dataclass
class _Broken:
    """The session dropped under a request; the caller reconnects once and retries, unless
    the server exited with the call in flight (it may have run: never run twice)."""

    detail: str
    exited: bool = False


@dataclass
class _Entry:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    session: McpSession | None = None
    fingerprint: str = ""
    failures: int = 0
    next_retry_at: float = 0.0
    last_error: str = ""
    tools: list[dict[str, Any]] | None = None
    tools_at: float | None = None
    refresh: asyncio.Task[None] | None = None
    refresh_again: bool = False
    invalidated: bool = False


class McpPool:
    """Implements `app.mcp.backend.McpBackend`; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        *,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.on_tools_changed: ToolsChangedHook | None = None
        """Set by the lead: persists a refreshed tool list (list_changed or TTL refresh)."""
        self.connects = 0
        """Sessions opened by this pool (for tests and metrics)."""
        self._backoff = (backoff_base_s, backoff_max_s)
        self._clock = clock
        self._guard = EgressGuard(settings)
        self._entries: dict[uuid.UUID, _Entry] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- public API ---

    async def call(
        self, server: McpServer, tool: str, arguments: dict[str, Any], ctx: CallContext
    ) -> ToolResult:
        """Call `tool` on `server`; every failure becomes `ToolResult.fail` for this tool only."""
        step = f"mcp:{server.name}/{tool}"
        spec = ServerSpec.from_row(server)
        outcome: types.CallToolResult | ToolResult | _Broken = _Broken("not connected")
        for _attempt in range(2):
            try:
                session = await self._session(server.id, spec)
            except McpConnectError as exc:
                retryable = not isinstance(exc, McpConfigError)
                return ToolResult.fail(str(exc), retryable=retryable, step=step)
            outcome = await self._call_once(session, spec, tool, arguments)
            if not isinstance(outcome, _Broken):
                break
            await self._drop(server.id, session)
            if outcome.exited:
                break
        match outcome:
            case _Broken(detail=detail, exited=True):
                return ToolResult.fail(
                    f"MCP server {spec.name!r} exited during {tool!r} (not retried: the call "
                    f"may have run; the next call starts it again): {detail}",
                    retryable=True,
                    step=step,
                )
            case _Broken(detail=detail):
                return ToolResult.fail(
                    f"MCP server {spec.name!r} dropped the connection during {tool!r} "
                    f"(after one reconnect): {detail}",
                    retryable=True,
                    step=step,
                )
            case ToolResult():
                return ToolResult.fail(outcome.error or "", retryable=outcome.retryable, step=step)
        self._refresh_if_stale(server, spec)
        return render_call_result(outcome, step=step)

    async def list_tools(self, server: McpServer) -> list[dict[str, Any]]:
        """Fetch `[{name, description, input_schema}]` from the server now (connecting if needed).

        Raises `Invalid` (refused configuration), `Unavailable` (cannot connect) or `Upstream`.
        """
        spec = ServerSpec.from_row(server)
        detail = ""
        for _attempt in range(2):
            try:
                session = await self._session(server.id, spec)
            except McpConfigError as exc:
                raise Invalid(str(exc)) from None
            except McpConnectError as exc:
                raise Unavailable(str(exc)) from None
            try:
                tools = await self._fetch_tools(session)
            except MCPError as exc:
                if not _session_lost(exc):
                    raise _list_failed(spec, exc) from None
                detail = describe_error(exc, spec)
                await self._drop(server.id, session)
                continue
            except (ValidationError, TimeoutError) as exc:
                raise _list_failed(spec, exc) from None
            except Exception as exc:
                detail = describe_error(exc, spec)
                await self._drop(server.id, session)
                continue
            self._store_tools(server.id, tools)
            return tools
        raise Unavailable(f"MCP server {spec.name!r} dropped the connection: {detail}")

    async def read_resource(self, server: McpServer, uri: str) -> types.ReadResourceResult:
        """Read `uri` on `server` (a resource link its tools return), connecting if needed.

        Raises `Invalid` (refused configuration), `Unavailable` or `Upstream` (the server
        does not have it, or failed)."""
        spec = ServerSpec.from_row(server)
        try:
            session = await self._session(server.id, spec)
        except McpConfigError as exc:
            raise Invalid(str(exc)) from None
        except McpConnectError as exc:
            raise Unavailable(str(exc)) from None
        try:
            async with asyncio.timeout(spec.call_timeout_s):
                return await session.read_resource(uri)
        except TimeoutError:
            raise Upstream(
                f"MCP server {spec.name!r} took over {spec.call_timeout_s:g}s to read {uri!r}"
            ) from None
        except (MCPError, ValidationError) as exc:
            raise Upstream(
                f"MCP server {spec.name!r} cannot read {uri!r}: {describe_error(exc, spec)}"
            ) from None
        except Exception as exc:
            await self._drop(server.id, session)
            raise Unavailable(
                f"MCP server {spec.name!r} dropped the connection: {describe_error(exc, spec)}"
            ) from None

    def check_command(self, transport: str, command: str | None) -> None:
        """A stdio command must be on the allow-list: refused when configured (422 naming
        `QUIVER_MCP_STDIO_COMMANDS`), not first at connect."""
        if transport != "stdio":
            return
        try:
            check_stdio_command(command, self.settings.mcp_stdio_commands)
        except McpConfigError as exc:
            raise Invalid(f"command: {exc}") from None

    async def invalidate(self, server_id: uuid.UUID) -> None:
        """Close the server's session (after an update or delete); the next call reconnects."""
        entry = self._entries.pop(server_id, None)
        if entry is None:
            return
        async with entry.lock:
            entry.invalidated = True
            session, entry.session = entry.session, None
        if entry.refresh is not None:
            entry.refresh.cancel()
        if session is not None:
            await session.aclose()

    async def aclose(self) -> None:
        """Close every session and background task (app shutdown)."""
        self._closed = True
        await asyncio.gather(*(self.invalidate(sid) for sid in list(self._entries)))
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def cached_tools(self, server_id: uuid.UUID) -> list[dict[str, Any]] | None:
        """The last tool list this process fetched for the server, if any."""
        entry = self._entries.get(server_id)
        return entry.tools if entry else None

    # --- sessions ---

    async def _session(self, server_id: uuid.UUID, spec: ServerSpec) -> McpSession:
        while True:
            if self._closed:
                raise McpConnectError("the MCP pool is shut down")
            entry = self._entries.setdefault(server_id, _Entry())
            current = entry.session
            if current is not None and current.alive and entry.fingerprint == spec.fingerprint:
                return current
            async with entry.lock:
                if entry.invalidated:
                    continue
                return await self._connect_locked(server_id, entry, spec)

    async def _connect_locked(
        self, server_id: uuid.UUID, entry: _Entry, spec: ServerSpec
    ) -> McpSession:
        current = entry.session
        if current is not None and current.alive and entry.fingerprint == spec.fingerprint:
            return current
        if current is not None:
            entry.session = None
            self._spawn(current.aclose())
        if entry.fingerprint != spec.fingerprint:
            entry.failures, entry.next_retry_at, entry.tools, entry.tools_at = 0, 0.0, None, None
            entry.fingerprint = spec.fingerprint
        wait = entry.next_retry_at - self._clock()
        if wait > 0:
            raise McpConnectError(
                f"MCP server {spec.name!r} is unavailable ({entry.last_error}); "
                f"next connection attempt in {wait:.1f}s"
            )
        pins = await self._check_config(spec)
        try:
            session = await McpSession.open(
                spec,
                build_transport(spec, pins),
                on_tools_changed=partial(self._tools_changed, server_id),
            )
        except McpConnectError as exc:
            entry.failures += 1
            base, cap = self._backoff
            delay = min(cap, base * 2 ** (entry.failures - 1))
            entry.next_retry_at = self._clock() + delay
            entry.last_error = str(exc)
            raise McpConnectError(f"{exc} (next attempt in {delay:g}s)") from None
        entry.failures, entry.next_retry_at, entry.last_error = 0, 0.0, ""
        entry.session = session
        self.connects += 1
        return session

    async def _check_config(self, spec: ServerSpec) -> Pins | None:
        """Refuse a disallowed command or destination; for a URL, the checked addresses."""
        if spec.transport == "stdio":
            check_stdio_command(spec.command, self.settings.mcp_stdio_commands)
            assert spec.command is not None
            resolve_stdio_command(spec.command, self.settings.mcp_stdio_commands)
            return None
        if spec.transport not in ("sse", "streamable_http"):
            raise McpConfigError(f"unknown MCP transport {spec.transport!r}")
        if not spec.url:
            raise McpConfigError(f"MCP server {spec.name!r} has no URL")
        try:
            target = await self._guard.check_url(spec.url)
        except FetchError as exc:
            raise McpConfigError(f"MCP server {spec.name!r}: {exc}") from None
        return {target.host: target.addresses}

    async def _drop(self, server_id: uuid.UUID, session: McpSession) -> None:
        entry = self._entries.get(server_id)
        if entry is not None and entry.session is session:
            entry.session = None
        await session.aclose()

    async def _call_once(
        self, session: McpSession, spec: ServerSpec, tool: str, arguments: dict[str, Any]
    ) -> types.CallToolResult | ToolResult | _Broken:
        try:
            async with asyncio.timeout(spec.call_timeout_s):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            return _timeout(spec, tool)
        except MCPError as exc:
            if _session_lost(exc):
                # A stdio connection ends only with its process: the call was in flight.
                exited = session.ended and spec.transport == "stdio"
                return _Broken(describe_error(exc, spec), exited=exited)
            if exc.code == types.REQUEST_TIMEOUT:
                return _timeout(spec, tool)
            return ToolResult.fail(
                f"MCP server {spec.name!r} rejected {tool!r}: {describe_error(exc, spec)}"
            )
        except ValidationError:
            return ToolResult.fail(f"MCP server {spec.name!r} sent an invalid result for {tool!r}")
        except Exception as exc:
            return _Broken(describe_error(exc, spec))

    # --- tool lists ---

    async def _fetch_tools(self, session: McpSession) -> list[dict[str, Any]]:
        async with asyncio.timeout(session.spec.call_timeout_s):
            tools = await session.list_tools()
        return [
            {
                "name": t.name,
                "description": plain_text(t.description or ""),
                "input_schema": t.input_schema,
            }
            for t in tools
        ]

    def _store_tools(self, server_id: uuid.UUID, tools: list[dict[str, Any]]) -> None:
        entry = self._entries.get(server_id)
        if entry is not None:
            entry.tools, entry.tools_at = tools, self._clock()

    def _tools_changed(self, server_id: uuid.UUID) -> None:
        """Called from the session task on `notifications/tools/list_changed` (or listen event)."""
        self._schedule_refresh(server_id)

    def _refresh_if_stale(self, server: McpServer, spec: ServerSpec) -> None:
        entry = self._entries.get(server.id)
        if entry is None:
            return
        ttl = self.settings.mcp_tools_ttl_s
        ages = [float("inf")]
        if entry.tools_at is not None:
            ages.append(self._clock() - entry.tools_at)
        if server.tools_refreshed_at is not None:
            refreshed = server.tools_refreshed_at
            if refreshed.tzinfo is None:
                refreshed = refreshed.replace(tzinfo=UTC)
            ages.append((datetime.now(UTC) - refreshed).total_seconds())
        if min(ages) > ttl:
            self._schedule_refresh(server.id)

    def _schedule_refresh(self, server_id: uuid.UUID) -> None:
        entry = self._entries.get(server_id)
        if entry is None or self._closed:
            return
        if entry.refresh is not None and not entry.refresh.done():
            entry.refresh_again = True
            return
        entry.tools_at = self._clock()  # a refresh is under way: not stale for another TTL
        entry.refresh = self._spawn(self._refresh(server_id, entry))

    async def _refresh(self, server_id: uuid.UUID, entry: _Entry) -> None:
        while True:
            entry.refresh_again = False
            session = entry.session
            if session is None or not session.alive:
                return
            try:
                tools = await self._fetch_tools(session)
            except Exception as exc:
                logger.info(
                    "MCP server %r: tool refresh failed: %s",
                    session.spec.name,
                    describe_error(exc, session.spec),
                )
                return
            entry.tools, entry.tools_at = tools, self._clock()
            await self._notify(server_id, tools)
            if not entry.refresh_again:
                return

    async def _notify(self, server_id: uuid.UUID, tools: list[dict[str, Any]]) -> None:
        hook = self.on_tools_changed
        if hook is None:
            return
        try:
            await hook(server_id, tools)
        except Exception:
            logger.exception("on_tools_changed hook failed for MCP server %s", server_id)

    def _spawn(self, coro: Awaitable[None]) -> asyncio.Task[None]:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _timeout(spec: ServerSpec, tool: str) -> ToolResult:
    return ToolResult.fail(
        f"MCP tool {tool!r} on {spec.name!r} timed out after {spec.call_timeout_s:g}s",
        retryable=True,
    )


def _list_failed(spec: ServerSpec, exc: Exception) -> Upstream:
    return Upstream(f"MCP server {spec.name!r} failed to list tools: {describe_error(exc, spec)}")


def _session_lost(exc: MCPError) -> bool:
    """The transport closed, or the server no longer knows the session (restart, idle expiry).

    Streamable HTTP reports an unknown `Mcp-Session-Id` as a 404, which the SDK (or the server's
    JSON-RPC body) surfaces as INVALID_REQUEST "Session not found" / "Session terminated".
    """
    if exc.code == types.CONNECTION_CLOSED:
        return True
    return exc.code == types.INVALID_REQUEST and "session" in exc.message.lower()
