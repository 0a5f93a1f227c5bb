"""`/mcp/agents/{agent_name}`: an agent's tool set over MCP streamable HTTP.

The MCP SDK's low-level `Server` and `StreamableHTTPSessionManager` serve the protocol (as
`manager.py` adapts them); this module authenticates the bearer key, finds the agent (404
before any MCP exchange), and hands `tools/list` / `tools/call` to `McpSessions`. The
endpoint speaks the session (`initialize`) protocol versions: a session is what a run is to
the journal. The stateless revision (2026-07-28) is refused with -32022 naming those
versions (`wire.protocol_refusal`).

Sessions outlive the process that opened them: the session id names the session's run, and a
request for a session this process does not hold gets a transport resumed under that id (its
client already initialized), with the session's state rebuilt from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from fastapi import FastAPI
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from app.agents.models import Agent
from app.agents.repository import AgentRepository
from app.db.session import request_session
from app.errors import QuiverError
from app.mcpserver import wire
from app.mcpserver.approval import ElicitationGate, supports_elicitation
from app.mcpserver.holds import SessionBusy
from app.mcpserver.listings import Listings
from app.mcpserver.manager import (
    AgentServer,
    SessionManager,
    opening_instructions,
    opening_session_id,
    sdk_middleware,
)
from app.mcpserver.oauth import bearer_principal, challenge
from app.mcpserver.resources import Resources
from app.mcpserver.sessions import McpSessions
from app.mcpserver.state import Caller, McpSession, parse_session_id
from app.mcpserver.transport import answer_after
from app.runtime import Runtime

logger = logging.getLogger("quiver.mcp_server")
_AGENT_PATH = re.compile(r"/agents/([^/]+)/?$")
_STATE_KEY = "quiver_mcp"


class McpEndpoint:
    """The ASGI app mounted at `/mcp` (outside the OpenAPI schema)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self.server = AgentServer(
            "quiver",
            version="0.1.0",
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_list_resources=self._list_resources,
            on_read_resource=self._read_resource,
        )
        self.sessions: McpSessions | None = None
        self.manager: SessionManager | None = None
        self.listings: Listings | None = None

    @contextlib.asynccontextmanager
    async def running(self, runtime: Runtime) -> AsyncIterator[None]:
        """Serve sessions for the app's lifetime; open sessions finish their runs at the end.

        The SDK's session manager runs in a task of its own: its task group must be left in
        the task that entered it, and an app's start and end may run in different tasks.
        """
        sessions = McpSessions(runtime.runs)
        settings = runtime.settings
        self.server.middleware = sdk_middleware(self.server.middleware)
        manager = SessionManager(
            self.server, sessions, settings.mcp_session_idle_s, settings.max_body_bytes
        )
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
        resources = Resources(runtime.sessionmaker, runtime.backends.skills, runtime.mcp)
        self.listings = Listings(resources, self._agent_now)
        try:
            yield
        finally:
            self.manager = None
            await sessions.aclose()  # before the transports end: the sessions are handed over
            stop.set()
            await task

    # --- HTTP ----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        manager = self.manager
        if manager is None:  # starting or stopping
            unavailable = wire.json_error(503, "Unavailable", "the MCP endpoint is not running")
            await unavailable(scope, receive, send)
            return
        response, caller, entered = await self._admit(scope)
        if response is not None:
            await response(scope, receive, send)
            return
        assert caller is not None
        assert self.sessions is not None
        if entered is None:
            await self._serve(manager, caller, scope, receive, send)
            return
        if scope["method"] != "POST":  # a GET stream may stay open: it holds nothing
            self.sessions.leave(entered)
            await self._serve(manager, caller, scope, receive, send)
            return
        try:  # the session is not let go of before this request is over
            await self._serve(manager, caller, scope, receive, send)
        finally:
            self.sessions.leave(entered)

    async def _serve(
        self, manager: SessionManager, caller: Caller, scope: Scope, receive: Receive, send: Send
    ) -> None:
        assert self.sessions is not None
        scope.setdefault("state", {})[_STATE_KEY] = caller
        headers = Request(scope).headers
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is not None:
            if scope["method"] == "DELETE":
                # The run is finished before the client hears back.
                await self.sessions.close(session_id)
                if not manager.holds(session_id):  # opened or served elsewhere: done
                    ended = Response(status_code=200, headers={MCP_SESSION_ID_HEADER: session_id})
                    await ended(scope, receive, send)
                    return
                await manager.handle_request(scope, receive, send)
                return
            if not manager.holds(session_id) or manager.connecting(session_id):
                parsed = parse_session_id(session_id)
                assert parsed is not None  # admitted
                version = headers.get("mcp-protocol-version")
                await manager.resume(session_id, version, parsed[1])
        if scope["method"] != "POST":  # a GET stream, a DELETE without a session
            await manager.handle_request(scope, receive, send)
            return
        limit = self.app.state.runtime.settings.max_body_bytes
        body, receive = await wire.read_body(receive, limit)
        refusal = wire.invalid_id(body)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        if session_id is not None:
            await manager.handle_request(scope, receive, send)
            return
        await self._open(caller, body, scope, receive, send)

    async def _open(
        self, caller: Caller, body: bytes, scope: Scope, receive: Receive, send: Send
    ) -> None:
        """A request without a session (`initialize`): the session's run starts with it."""
        assert self.manager is not None
        sessions = self.sessions
        assert sessions is not None
        opening = wire.initialize_params(body)
        if opening is None:  # not an `initialize`: the SDK answers (no session comes of it)
            await self.manager.handle_request(scope, receive, send)
            return
        elicits = isinstance((opening.get("capabilities") or {}).get("elicitation"), dict)
        try:
            state = await sessions.start(caller, elicitation=elicits)
        except QuiverError as exc:  # the key's run rate: refused before any MCP exchange
            refused = wire.json_error(exc.status_code, exc.kind, exc.message, exc.headers())
            await refused(scope, receive, send)
            return
        opened = False

        async def send_opening(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and message["status"] < 400:
                opened = True
            await send(message)

        prompt = opening_instructions.set(state.toolset.system_prompt or None)
        named = opening_session_id.set(state.session_id)
        try:
            await self.manager.handle_request(scope, receive, send_opening)
        finally:
            opening_session_id.reset(named)
            opening_instructions.reset(prompt)
            if not opened:  # no session came of it: its run ends at once
                await sessions.drop(state)

    async def _admit(self, scope: Scope) -> tuple[Response | None, Caller | None, uuid.UUID | None]:
        """401 without a valid key, 404 for an unknown agent or one the key may not use, or
        for a session that is not theirs (or over), 503 while another worker will not let go
        of the session. Admitted to a session: its run (`McpSessions.leave` it when done)."""
        request = Request(scope)
        match = _AGENT_PATH.search(scope["path"])
        name = match.group(1) if match else ""
        runtime: Runtime = self.app.state.runtime
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            detail = "missing API key: send 'Authorization: Bearer <key>' (or use OAuth)"
            return challenge(runtime.settings, request, name, detail, invalid=False), None, None
        entered: uuid.UUID | None = None
        try:
            async with request_session(runtime.sessionmaker) as session:
                found = await self._caller(session, request, token.strip(), name)
                if isinstance(found, Response):
                    return found, None, None
                session_id = request.headers.get(MCP_SESSION_ID_HEADER)
                if session_id is None or self.sessions is None:
                    return None, found, None
                try:
                    admitted = await self.sessions.admit(
                        session,
                        session_id,
                        agent_id=found.agent.id,
                        key_id=found.principal.key_id,
                    )
                except SessionBusy as exc:  # another worker holds it: try again
                    refused = wire.json_error(503, exc.kind, exc.message, exc.headers())
                    return refused, None, None
                if not admitted:  # ended, unknown, or another agent's or key's
                    return wire.json_error(404, "NotFound", "MCP session not found"), None, None
                entered = uuid.UUID(hex=session_id[:32])
        except BaseException:
            if entered is not None and self.sessions is not None:
                self.sessions.leave(entered)
            raise
        return None, found, entered

    async def _caller(
        self, session: AsyncSession, request: Request, token: str, name: str
    ) -> Caller | Response:
        """The bearer key's principal and the agent it may use (401, 404, or -32022)."""
        runtime: Runtime = self.app.state.runtime
        principal = await bearer_principal(
            runtime.settings, runtime.keys, session, request, token, name
        )
        if isinstance(principal, Response):
            return principal
        session_id = request.headers.get(MCP_SESSION_ID_HEADER)
        state = self.sessions.get(session_id) if self.sessions and session_id else None
        # A live session keeps the agent it was opened with: only the key is read again.
        agent = state.agent if state is not None and state.agent.name == name else None
        if agent is None and name:
            agent = await AgentRepository(session).get_by(name=name)
        if agent is None or not principal.may_use(agent.id):
            return wire.json_error(404, "NotFound", f"agent {name!r} not found")
        version = request.headers.get("mcp-protocol-version")
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return wire.protocol_refusal(version)
        return Caller(agent=agent, principal=principal)

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
        gate = (
            ElicitationGate(ctx.session, related_request_id=ctx.request_id)
            if supports_elicitation(ctx.session)
            else None
        )
        outcome = await self.sessions.call(
            state, params.name, dict(params.arguments or {}), gate=gate
        )
        await answer_after(ctx.request, outcome.stored)  # the answer waits for the events
        notes: list[types.ServerNotification] = []
        if outcome.loaded:
            notes.append(types.ToolListChangedNotification())
        assert self.listings is not None
        more, links = await self.listings.after_call(state, outcome.text, params.arguments or {})
        for note in [*notes, *more]:
            # On this call's own response stream: it reaches the client whichever worker
            # serves the call (a GET stream may be held by another one, or none).
            await ctx.session.send_notification(note, related_request_id=ctx.request_id)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=outcome.text), *links],
            is_error=not outcome.ok,
        )

    # --- prompts and resources (app/mcpserver/listings.py) ------------------------------

    async def _agent_now(self, agent: Agent) -> Agent:
        runtime: Runtime = self.app.state.runtime
        return await runtime.agents.get(agent.id) or agent

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        assert self.listings is not None
        return await self.listings.list_prompts(await self._session(ctx))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        assert self.listings is not None
        return await self.listings.get_prompt(await self._session(ctx), params.name)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        assert self.listings is not None
        return await self.listings.list_resources(await self._session(ctx))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        assert self.listings is not None
        return await self.listings.read_resource(await self._session(ctx), str(params.uri))
