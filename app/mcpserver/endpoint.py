"""`/mcp/agents/{agent_name}`: an agent's tool set over MCP streamable HTTP.

The MCP SDK's low-level `Server` and `StreamableHTTPSessionManager` serve the protocol; this
module authenticates the bearer key, finds the agent (404 before any MCP exchange), and
hands `tools/list` / `tools/call` to `McpSessions`. The endpoint speaks the session
(`initialize`) protocol versions: a session is what a run is to the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.apikeys.service import api_key_service, hash_key
from app.errors import QuiverError, error_body
from app.mcpserver.approval import ElicitationGate, supports_elicitation
from app.mcpserver.sessions import Caller, McpSession, McpSessions, assemble_for_mcp
from app.runtime import Runtime
from app.tenancy.principal import USER_HEADER, Principal

_AGENT_PATH = re.compile(r"/agents/([^/]+)/?$")
_STATE_KEY = "quiver_mcp"
_instructions: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "quiver_mcp_instructions", default=None
)
"""The agent's instructions for the `initialize` answer of the session being opened."""
_plain_json: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "quiver_mcp_plain_json", default=False
)
"""The session being opened answers each request with one JSON body instead of an SSE stream
(its client cannot elicit, so nothing but the answer is ever sent on a request's stream)."""
_PEEK_LIMIT = 65536
"""The most of an opening request's body read ahead to see the client's capabilities."""


KEY_RECHECK_S = 1.0
"""A bearer key is read from the database at most this often for the requests of live sessions
(a revoked key stops working within it); opening a session always reads it."""
_MAX_KEYS = 1024
_NOBODY = Principal(key_id=uuid.UUID(int=0), admin=False)


@dataclass(frozen=True, kw_only=True)
class _KnownKey:
    """A key with chat or admin scope that the database confirmed at `checked`."""

    principal: Principal
    checked: float

    def fresh(self) -> bool:
        return time.monotonic() - self.checked <= KEY_RECHECK_S


class _AgentServer(Server[Any]):
    """One server for every agent: `initialize` answers with the opening agent's prompt."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )
        return options.model_copy(update={"instructions": _instructions.get()})


class _SessionManager(StreamableHTTPSessionManager):
    """Ends the session's run however the session ends (DELETE, idle timeout, crash)."""

    def __init__(self, server: Server[Any], sessions: McpSessions, idle_s: float) -> None:
        super().__init__(server, session_idle_timeout=idle_s)
        self.quiver_sessions = sessions

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and _plain_json.get():
            transport.is_json_response_enabled = True
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        await super()._discard_session(session_id, transport)
        await self.quiver_sessions.close(session_id)


def _json_error(status: int, kind: str, detail: str) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(kind, detail), status_code=status, headers=headers)


def _protocol_refusal() -> Response:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "this endpoint serves MCP sessions: send initialize "
            f"(protocol versions {', '.join(HANDSHAKE_PROTOCOL_VERSIONS)})",
        },
    }
    return Response(json.dumps(body), status_code=400, media_type="application/json")


async def _peek_capabilities(receive: Receive) -> tuple[Receive, bool]:
    """Read the opening request's body ahead: does the client declare elicitation (or send
    something this cannot tell)? The returned `receive` replays the body to the SDK."""
    buffered: list[Message] = []
    size = 0
    while True:
        message = await receive()
        buffered.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False) or size > _PEEK_LIMIT:
            break
    elicits = True
    if buffered[-1]["type"] == "http.request" and not buffered[-1].get("more_body", False):
        with contextlib.suppress(ValueError, KeyError, TypeError):
            body = json.loads(b"".join(m.get("body", b"") for m in buffered))
            capabilities = body["params"]["capabilities"] if isinstance(body, dict) else None
            if isinstance(capabilities, dict):
                elicits = "elicitation" in capabilities
    pending = iter(buffered)

    async def replay() -> Message:
        return next(pending, None) or await receive()

    return replay, elicits


class McpEndpoint:
    """The ASGI app mounted at `/mcp` (outside the OpenAPI schema)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.server = _AgentServer(
            "quiver",
            version="0.1.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self.sessions: McpSessions | None = None
        self.manager: _SessionManager | None = None
        self._keys: dict[str, _KnownKey] = {}
        """sha256 of a bearer key → what the database said about it (see `KEY_RECHECK_S`)."""

    @contextlib.asynccontextmanager
    async def running(self, runtime: Runtime) -> AsyncIterator[None]:
        """Serve sessions for the app's lifetime; open sessions finish their runs at the end.

        The SDK's session manager runs in a task of its own: its task group must be left in
        the task that entered it, and an app's start and end may run in different tasks.
        """
        sessions = McpSessions(runtime.runs)
        manager = _SessionManager(self.server, sessions, runtime.settings.mcp_session_idle_s)
        ready, stop = asyncio.Event(), asyncio.Event()

        async def serve() -> None:
            async with manager.run():
                ready.set()
                await stop.wait()

        task = asyncio.create_task(serve(), name="mcp-endpoint")
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()  # start-up failed: raise it
        self.sessions, self.manager = sessions, manager
        try:
            yield
        finally:
            self.manager = None
            await sessions.aclose()
            stop.set()
            await task

    # --- HTTP ----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self.manager is None:  # starting or stopping
            unavailable = _json_error(503, "Unavailable", "the MCP endpoint is not running")
            await unavailable(scope, receive, send)
            return
        response, caller = await self._admit(scope)
        if response is not None:
            await response(scope, receive, send)
            return
        assert caller is not None
        assert self.sessions is not None
        scope.setdefault("state", {})[_STATE_KEY] = caller
        session_id = Request(scope).headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None or scope["method"] != "POST":  # only a POST opens one
            if session_id is not None and scope["method"] == "DELETE":
                # The run is finished before the client hears back.
                await self.sessions.close(session_id)
            assert self.manager is not None
            await self.manager.handle_request(scope, receive, send)
            return
        await self._open(caller, scope, receive, send)

    async def _open(self, caller: Caller, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session (`initialize`): the session's run starts with it."""
        assert self.manager is not None
        sessions = self.sessions
        assert sessions is not None
        toolset = await assemble_for_mcp(caller.agent, sessions.runs)
        try:
            state = await sessions.start(caller, toolset)
        except QuiverError as exc:  # the key's run rate: refused before any MCP exchange
            await toolset.aclose()
            await _json_error(exc.status_code, exc.kind, exc.message)(scope, receive, send)
            return
        bound = False

        async def send_opening(message: Message) -> None:
            nonlocal bound
            if message["type"] == "http.response.start" and message["status"] < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == MCP_SESSION_ID_HEADER.encode():
                        sessions.bind(value.decode("latin-1"), state)
                        bound = True
            await send(message)

        receive, elicits = await _peek_capabilities(receive)
        token = _instructions.set(toolset.system_prompt or None)
        plain = _plain_json.set(not elicits)
        try:
            await self.manager.handle_request(scope, receive, send_opening)
        finally:
            _plain_json.reset(plain)
            _instructions.reset(token)
            if not bound:  # no session came of it: its run ends at once
                await sessions.finish(state)

    async def _admit(self, scope: Scope) -> tuple[Response | None, Caller | None]:
        """401 without a valid key, 404 for an unknown agent or one the key may not use."""
        request = Request(scope)
        match = _AGENT_PATH.search(scope["path"])
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _json_error(
                401, "Unauthorized", "missing API key: send 'Authorization: Bearer <key>'"
            ), None
        name = match.group(1) if match else ""
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        state = self.sessions.get(session_id) if self.sessions and session_id else None
        # A live session keeps the agent it was opened with: only the key is read again.
        agent = state.agent if state is not None and state.agent.name == name else None
        digest = hash_key(token.strip())
        known = self._keys.get(digest)
        if agent is not None and known is not None and known.fresh():
            principal = known.principal
        else:
            denied, principal, agent = await self._read_key(digest, token.strip(), name, agent)
            if denied is not None:
                return denied, None
        user = request.headers.get(USER_HEADER) or None
        if user != principal.user:
            principal = dataclasses.replace(principal, user=user)
        if agent is None or not principal.may_use(agent.id):
            return _json_error(404, "NotFound", f"agent {name!r} not found"), None
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return _protocol_refusal(), None
        if state is not None and not state.belongs_to(agent.id, principal.key_id):
            return _json_error(404, "NotFound", "MCP session not found"), None
        return None, Caller(agent=agent, principal=principal)

    async def _read_key(
        self, digest: str, token: str, name: str, agent: Agent | None
    ) -> tuple[Response | None, Principal, Agent | None]:
        """The key from the database (remembered for `KEY_RECHECK_S`), and the agent by name
        unless the session already has it."""
        runtime: Runtime = self.app.state.runtime
        async with runtime.sessionmaker() as session:
            key = await api_key_service.authenticate(session, token)
            if key is None:
                self._keys.pop(digest, None)
                return _json_error(401, "Unauthorized", "invalid or revoked API key"), _NOBODY, None
            if not {"admin", "chat"} & set(key.scopes):
                return (
                    _json_error(
                        403, "Forbidden", "this route needs an API key with scope 'chat' or 'admin'"
                    ),
                    _NOBODY,
                    None,
                )
            principal = Principal.of(key)
            if agent is None and name:
                agent = await AgentRepository(session).get_by(name=name)
            await session.commit()
        if len(self._keys) >= _MAX_KEYS:
            self._keys = {k: v for k, v in self._keys.items() if v.fresh()}
        self._keys[digest] = _KnownKey(principal=principal, checked=time.monotonic())
        return None, principal, agent

    # --- MCP handlers --------------------------------------------------------------------

    async def _session(self, ctx: ServerRequestContext[Any, Any]) -> McpSession:
        request = ctx.request
        assert isinstance(request, Request)
        assert self.sessions is not None
        caller: Caller = request.state.quiver_mcp
        session_id = request.headers.get(MCP_SESSION_ID_HEADER) or ""
        return await self.sessions.open(session_id, caller)

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        state = await self._session(ctx)
        tools = state.phase.offered()
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool["function"]["name"],
                    description=tool["function"].get("description"),
                    input_schema=tool["function"].get("parameters") or {"type": "object"},
                )
                for tool in tools
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        state = await self._session(ctx)
        assert self.sessions is not None
        gate = ElicitationGate(ctx.session) if supports_elicitation(ctx.session) else None
        outcome = await self.sessions.call(
            state, params.name, dict(params.arguments or {}), gate=gate
        )
        if outcome.loaded:
            await ctx.session.send_tool_list_changed()
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text)],
            is_error=not outcome.ok,
        )
