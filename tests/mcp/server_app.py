"""A small real MCP server for the pool tests, runnable over stdio, SSE and streamable HTTP.

    python -m tests.mcp.server_app --transport stdio
    python -m tests.mcp.server_app --transport sse --port 8123

`make_server()` builds a fresh instance (an HTTP app's session manager runs only once).
`stats` reports how many handshakes (`initialize` or `server/discover`) the process served,
which is how the tests count sessions from the server side.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sys
import time
from collections import Counter
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND

STARTED_AT = time.time()
HANDSHAKES = ("initialize", "server/discover")
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
LOOKUP_HTML = (
    '<p>Look up a <a href="https://example.test/docs/customers">customer</a> by its '
    "<code>id</code> &amp; return it.</p><ul><li>Cached for 60&nbsp;s.</li>"
    "<li>Deleted customers are <strong>not</strong> found.</li></ul>"
)
"""A tool description in HTML, as Stripe-derived MCP servers publish them."""


class Counting:
    """Server middleware counting inbound methods; `legacy` refuses the 2026-era probe."""

    def __init__(self, *, legacy: bool = False) -> None:
        self.methods: Counter[str] = Counter()
        self.legacy = legacy
        self.first_handshake_at: float | None = None
        self.handshake_delay = 0.0
        self.inflight = 0
        self.max_inflight = 0
        self.cancelled: list[str] = []
        """Tools whose running call was stopped because the client cancelled it (the
        `notifications/cancelled` frames themselves are counted in `methods`)."""
        """Most handshakes in progress at once (proves concurrent connects)."""
        """Seconds to stall every handshake (connect-timeout and concurrency tests)."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        self.methods[ctx.method] += 1
        if ctx.method in HANDSHAKES:
            if self.first_handshake_at is None:
                self.first_handshake_at = time.time()
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            try:
                if self.handshake_delay:
                    await asyncio.sleep(self.handshake_delay)
            finally:
                self.inflight -= 1
        if self.legacy and ctx.method == "server/discover":
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found")
        return await call_next(ctx)

    @property
    def handshakes(self) -> int:
        return sum(self.methods[m] for m in HANDSHAKES)


def make_server(name: str = "testsrv", *, legacy: bool = False) -> tuple[MCPServer, Counting]:
    """A fresh server; `legacy=True` makes clients fall back to the `initialize` handshake."""
    server: MCPServer = MCPServer(name, log_level="WARNING")
    counting = Counting(legacy=legacy)
    server._lowlevel_server.middleware.append(counting)

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(description=LOOKUP_HTML)
    def lookup(id: str) -> str:
        return f"customer {id}"

    @server.tool()
    def echo(text: str, repeat: int = 1) -> str:
        """Echo the text, optionally repeated."""
        return text * repeat

    @server.tool()
    def nul_text() -> str:
        """Text with a NUL character in it (storage tests)."""
        return "abc\x00def"

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            counting.cancelled.append("slow")
            raise
        return f"slept {seconds}"

    @server.tool()
    def fail(message: str) -> str:
        """Always fails with the given message."""
        raise ToolError(message)

    @server.tool()
    def image() -> Image:
        """Return a 1x1 PNG."""
        return Image(data=PNG_1PX, format="png")

    @server.tool()
    def env() -> dict[str, str]:
        """The process environment (to prove what a stdio child inherits)."""
        return dict(os.environ)

    @server.tool()
    def stats(ctx: Context) -> dict[str, Any]:
        """Process id, handshake count and the negotiated protocol version."""
        return {
            "pid": os.getpid(),
            "handshakes": counting.handshakes,
            "protocol": ctx.protocol_version,
            "started_at": STARTED_AT,
            "first_handshake_at": counting.first_handshake_at,
        }

    @server.tool()
    def crash() -> str:
        """Exit the server process immediately (stdio crash tests)."""
        os._exit(3)

    @server.tool()
    async def grow(tool_name: str, ctx: Context) -> str:
        """Register a new tool and announce that the tool list changed."""

        def added() -> str:
            return f"I am {tool_name}"

        server.add_tool(added, name=tool_name, description=f"Added at runtime: {tool_name}")
        # Handshake-era clients get the notification; 2026-era clients a listen event.
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return f"added {tool_name}"

    return server, counting


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", choices=["stdio", "sse", "streamable-http"], default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--legacy", action="store_true", help="refuse server/discover")
    parser.add_argument("--startup-delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.startup_delay:
        time.sleep(args.startup_delay)
    server, _ = make_server(legacy=args.legacy)
    if args.transport == "stdio":
        server.run("stdio")
    elif args.transport == "sse":
        asyncio.run(server.run_sse_async(port=args.port))
    else:
        asyncio.run(server.run_streamable_http_async(port=args.port))


if __name__ == "__main__":
    sys.exit(main())
