"""`mcp(subcommand=discover|call|search, server?, tool?, parameters?, query?)`.

discover answers from the cached tool list; only call reaches the server; search ranks
every server and tool for a query. `call` takes the tool's arguments as `parameters` or
`arguments` (the admin call route's word), not both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from app.kit.schemas import one_spelling
from app.mcp.backend import McpBackend
from app.mcp.models import McpServer
from app.pipeline.sources.disclosure import Entry, Source, parameter_texts, source
from app.pipeline.sources.meta_base import KindMetaTool
from app.pipeline.sources.rows import McpToolInfo, mcp_tools
from app.tools.base import CallContext, SearchHints, ToolResult
from app.tools.cache import DERIVED, row_key
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, compact_json, model_schema
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments, validate_arguments

NAME = "mcp"
SUBCOMMANDS = ("discover", "call", "search")
DISCOVER_LISTED = 10
_INTRO = (
    "MCP server tools. discover: input schemas; call: invoke a tool with parameters;"
    " search: find by query."
)
_SEARCH_HINT = "Use discover with server=<name> and tool=<name> for the input schema."


def tool_summary(server: McpServer, tool: McpToolInfo) -> str:
    lines = [f"{server.name}/{tool.name}"]
    if tool.description:
        lines.append(tool.description.strip())
    lines.append(f"input schema: {compact_json(model_schema(tool.input_schema))}")
    return "\n".join(lines)


def _tool_entries(server: McpServer) -> list[Entry]:
    return DERIVED.get(
        row_key(server, "search"),
        lambda: [
            Entry(
                f"{server.name}/{t.name}",
                t.description.strip(),
                SearchHints(source=server.name, source_description=server.description),
                parameter_texts(model_schema(t.input_schema)),
            )
            for t in mcp_tools(server)
        ],
    )


def _server_source(server: McpServer) -> Source:
    return DERIVED.get(
        row_key(server, "source"),
        lambda: source(
            server.name, server.description, [(t.name, t.description) for t in mcp_tools(server)]
        ),
    )


class McpMetaTool(KindMetaTool[McpServer]):
    name = NAME
    row_field = "server"
    row_label = "MCP server"
    intro = _INTRO
    heading = "Servers"
    catalog_noun = "Tools"
    search_noun = "servers and tools"
    search_hint = _SEARCH_HINT
    subcommands = SUBCOMMANDS
    properties: ClassVar[dict[str, Any]] = {
        "tool": {"type": "string"},
        "parameters": {"type": "object"},
        "arguments": {"type": "object"},
    }

    def __init__(
        self,
        servers: Sequence[McpServer],
        backend: McpBackend,
        query: str = "",
        inline_max: int | None = None,
    ) -> None:
        super().__init__(servers, query, inline_max)
        self._tools: dict[str, dict[str, McpToolInfo]] = {}
        self._backend = backend

    def name_of(self, row: McpServer) -> str:
        return row.name

    def source_of(self, row: McpServer) -> Source:
        return _server_source(row)

    def entries_of(self, row: McpServer) -> list[Entry]:
        return _tool_entries(row)

    async def run(
        self, subcommand: str, row: McpServer, args: dict[str, Any], ctx: CallContext
    ) -> ToolResult:
        if subcommand == "discover":
            return self._discover(row, args.get("tool"))
        try:
            params = one_spelling(args, "parameters", "arguments").get("parameters")
        except ValueError as exc:
            return ToolResult.fail(invalid_arguments(NAME, str(exc)))
        return await self._call(row, args.get("tool"), params, ctx)

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


def mcp_meta_toolset(
    servers: Sequence[McpServer],
    backend: McpBackend,
    query: str = "",
    inline_max: int | None = None,
) -> FunctionToolset:
    """The MCP meta-tool; `query` (the user's message) ranks a capped stub."""
    tool = McpMetaTool(servers, backend, query, inline_max)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="mcp")
