"""`mcp(subcommand=discover|call, server, tool?, parameters?)` (docs/contract.md §4.3, §7.3).

discover answers from the cached tool list; only call reaches the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.mcp.backend import McpBackend
from app.mcp.models import McpServer
from app.pipeline.sources.rows import McpToolInfo, mcp_tools
from app.pipeline.sources.stubs import mcp_stub
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, compact_json, model_schema
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments, validate_arguments

NAME = "mcp"
DISCOVER_LISTED = 10
_INTRO = "MCP server tools. discover: input schemas; call: invoke a tool with parameters."


def tool_summary(server: McpServer, tool: McpToolInfo) -> str:
    lines = [f"{server.name}/{tool.name}"]
    if tool.description:
        lines.append(tool.description.strip())
    lines.append(f"input schema: {compact_json(model_schema(tool.input_schema))}")
    return "\n".join(lines)


class McpMetaTool:
    def __init__(self, servers: Sequence[McpServer], backend: McpBackend) -> None:
        self._servers = {s.name: s for s in servers}
        self._tools: dict[str, dict[str, McpToolInfo]] = {}
        self._backend = backend
        catalog = "\n".join(mcp_stub(s) for s in servers)
        self.tool = ToolDef(
            name=NAME,
            description=f"{_INTRO}\nServers:\n{catalog}",
            parameters={
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": ["discover", "call"]},
                    "server": {"type": "string", "enum": list(self._servers)},
                    "tool": {"type": "string"},
                    "parameters": {"type": "object"},
                },
                "required": ["subcommand", "server"],
            },
            kind="mcp",
            target="mcp",
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = str(args.get("server", ""))
        server = self._servers.get(name)
        if server is None:
            return ToolResult.fail(unknown_name("MCP server", name, list(self._servers)))
        match args.get("subcommand"):
            case "discover":
                return self._discover(server, args.get("tool"))
            case "call":
                return await self._call(server, args.get("tool"), args.get("parameters"), ctx)
            case other:
                return ToolResult.fail(f"Unknown subcommand {other!r}. Valid: discover, call.")

    def _server_tools(self, server: McpServer) -> dict[str, McpToolInfo]:
        """Parsed on first use: assembly only needs the names for the description."""
        if server.name not in self._tools:
            self._tools[server.name] = {t.name: t for t in mcp_tools(server)}
        return self._tools[server.name]

    def _find(self, server: McpServer, name: str) -> McpToolInfo | ToolResult:
        tools = self._server_tools(server)
        found = tools.get(name)
        if found is None:
            return ToolResult.fail(
                unknown_name("tool", name, list(tools), scope=f"MCP server {server.name!r}")
            )
        return found

    def _discover(self, server: McpServer, tool_name: Any) -> ToolResult:
        if tool_name:
            found = self._find(server, str(tool_name))
            if isinstance(found, ToolResult):
                return found
            return ToolResult.success(clip_output(tool_summary(server, found)))
        tools = list(self._server_tools(server).values())
        if not tools:
            return ToolResult.success(f"MCP server {server.name!r} lists no tools.")
        blocks = [tool_summary(server, t) for t in tools]
        rest = ", ".join(t.name for t in tools[DISCOVER_LISTED:])
        shown = capped(
            blocks, DISCOVER_LISTED, noun="tools", hint=f"pass tool=<name> for one; {rest}"
        )
        return ToolResult.success(clip_output("\n\n".join(shown)))

    async def _call(
        self, server: McpServer, tool_name: Any, parameters: Any, ctx: CallContext
    ) -> ToolResult:
        if not tool_name:
            return ToolResult.fail(
                invalid_arguments(NAME, "'tool' is required for subcommand 'call'")
            )
        found = self._find(server, str(tool_name))
        if isinstance(found, ToolResult):
            return found
        params = parameters if parameters is not None else {}
        problem = validate_arguments(found.input_schema, params, at="parameters")
        if problem:
            return ToolResult.fail(invalid_arguments(NAME, problem))
        result = await self._backend.call(server, found.name, params, ctx)
        return with_step(result, f"mcp:{server.name}/{found.name}")


def mcp_meta_toolset(servers: Sequence[McpServer], backend: McpBackend) -> FunctionToolset:
    tool = McpMetaTool(servers, backend)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="mcp")
