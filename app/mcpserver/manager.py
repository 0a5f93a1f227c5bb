"""The MCP SDK's server and session manager as the endpoint (`endpoint.py`) uses them.

One low-level `Server` for every agent, whose `initialize` answer carries the opening agent's
instructions; a session manager that names each session after its run, resumes sessions
opened by another process, and tells `McpSessions` however a session's transport ends here.
With tracing off, the SDK's own OpenTelemetry span per request is left out (`sdk_middleware`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskStatus
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.context import ServerMiddleware
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.transport_context import TransportContext
from mcp_types import DEFAULT_NEGOTIATED_VERSION

from app.mcpserver.sessions import McpSessions
from app.mcpserver.transport import AnswerFirstTransport
from app.ops import tracing

logger = logging.getLogger("quiver.mcp_server")

opening_instructions: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "quiver_mcp_instructions", default=None
)
"""The agent's instructions for the `initialize` answer of the session being opened."""
opening_session_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "quiver_mcp_new_session", default=None
)
"""The id of the session being opened (named after its run)."""


class AgentServer(Server[Any]):
    """One server for every agent: `initialize` answers with the opening agent's prompt."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = super().create_initialization_options(
            notification_options
            or NotificationOptions(
                tools_changed=True, prompts_changed=True, resources_changed=True
            ),
            experimental_capabilities,
            extensions,
        )
        return options.model_copy(update={"instructions": opening_instructions.get()})


class SessionManager(StreamableHTTPSessionManager):
    """Names sessions after their runs, resumes sessions opened elsewhere, and tells
    `McpSessions` however a session's transport ends here (DELETE, idle timeout, shutdown)."""

    def __init__(
        self, server: Server[Any], sessions: McpSessions, idle_s: float, max_body: int
    ) -> None:
        # The app's own body limit (`RequestGuard`, 413 with the usual body) is the only one.
        super().__init__(server, session_idle_timeout=idle_s, max_request_body_size=max_body + 1)
        self.quiver_sessions = sessions
        self._resuming: dict[str, asyncio.Event] = {}
        """Transports being resumed, set once connected (a request for one waits)."""

    def holds(self, session_id: str) -> bool:
        return session_id in self._server_instances

    def connecting(self, session_id: str) -> bool:
        return session_id in self._resuming

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        """The SDK's, with this endpoint's transport under the id of the session's run."""
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        session_id = opening_session_id.get() or uuid.uuid4().hex
        transport = AnswerFirstTransport(
            mcp_session_id=session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    async def resume(self, session_id: str, protocol_version: str | None, elicits: bool) -> None:
        """Serve a session opened by another process (or before a restart) from now on: a
        transport under its id whose connection starts out initialized, with the client's
        capabilities as the session id carries them. A request that comes while another one's
        transport is still connecting waits for it (it would find no stream to write to)."""
        async with self._session_creation_lock:
            connecting = self._resuming.get(session_id)
            held = session_id in self._server_instances
            if not held:
                transport = AnswerFirstTransport(
                    mcp_session_id=session_id,
                    is_json_response_enabled=self.json_response,
                    security_settings=self.security_settings,
                    idle_timeout=self.session_idle_timeout,
                )
                self._server_instances[session_id] = transport
                self._resuming[session_id] = asyncio.Event()
        if held:
            if connecting is not None:
                await connecting.wait()
            return
        version = protocol_version or DEFAULT_NEGOTIATED_VERSION
        capabilities = types.ClientCapabilities(
            elicitation=types.ElicitationCapability() if elicits else None
        )

        async def run_server(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            async with transport.connect() as (read_stream, write_stream):
                task_status.started()
                try:
                    idle_scope = transport.idle_scope or anyio.CancelScope()
                    with idle_scope:
                        dispatcher: JSONRPCDispatcher[TransportContext] = JSONRPCDispatcher(
                            read_stream, write_stream, inline_methods=frozenset({"initialize"})
                        )
                        connection = Connection.for_loop(
                            dispatcher, session_id=session_id, protocol_version_hint=version
                        )
                        connection.client_params = types.InitializeRequestParams(
                            protocol_version=version,
                            capabilities=capabilities,
                            client_info=types.Implementation(name="resumed", version="0"),
                        )
                        connection.initialized.set()
                        await serve_connection(
                            self.app,
                            dispatcher,
                            connection=connection,
                            lifespan_state=self._lifespan_state,
                        )
                except Exception:
                    logger.exception("resumed MCP session %s crashed", session_id[:64])
                finally:
                    await self._discard_session(session_id, transport)

        task_group: Any = self._task_group  # set while the manager runs
        try:
            await task_group.start(run_server)
        finally:
            self._resuming.pop(session_id).set()

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        held = self._server_instances.get(session_id) is transport
        await super()._discard_session(session_id, transport)
        if held:
            await self.quiver_sessions.ended_here(session_id)


def sdk_middleware(chain: list[ServerMiddleware[Any]]) -> list[ServerMiddleware[Any]]:
    """The SDK's middleware, less its OpenTelemetry span per request while tracing is off:
    without a tracer provider the span records nothing, yet entering and leaving it costs
    ~9 µs on every call's path (docs/benchmarks.md, sixth round). Kept with tracing on."""
    if tracing.enabled():
        return chain
    return [m for m in chain if not isinstance(m, OpenTelemetryMiddleware)]
