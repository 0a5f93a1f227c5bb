"""`connector(subcommand=discover|execute|search, connector?, action?, parameters?, query?)`.

discover and execute work on one connector; search ranks every connector and action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.connectors.models import Connector, ConnectorAction
from app.tools.backends import ConnectorBackend
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.cache import DERIVED
from app.tools.disclosure import (
    Entry,
    EntryIndex,
    Source,
    index_for,
    kind_catalog,
    kind_entries,
    name_schema,
    search_text,
    source,
)
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, compact_json, model_schema, one_line
from app.tools.stubs import connector_key
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments, validate_arguments

NAME = "connector"
SUBCOMMANDS = ("discover", "execute", "search")
DISCOVER_LISTED = 10
_INTRO = (
    "HTTP APIs. discover: action parameter schemas; execute: run an action with parameters;"
    " search: find by query."
)
_SEARCH_HINT = "Use discover with connector=<name> (and action=<name>) for the schemas."


def action_summary(connector: Connector, action: ConnectorAction) -> str:
    """One action as discover shows it: header, description, parameters schema."""
    head = f"{connector.name}/{action.name}: {action.method.upper()} {action.path}"
    if action.requires_confirmation:
        head += " [requires confirmation]"
    lines = [head]
    if action.description:
        lines.append(one_line(action.description))
    lines.append(f"parameters: {compact_json(model_schema(action.parameters))}")
    return "\n".join(lines)


def action_step(connector: Connector, action: ConnectorAction) -> str:
    return f"connector:{connector.name}/{action.name}"


def confirmation_needed(connector: Connector, action: ConnectorAction) -> ToolResult:
    """An action marked `requires_confirmation` runs only once a person approved the call."""
    step = action_step(connector, action)
    return ToolResult.needs_approval(f"{step} requires confirmation", step=step)


def _action_entries(connector: Connector) -> list[Entry]:
    return DERIVED.get(
        connector_key(connector, "search"),
        lambda: [Entry(f"{connector.name}/{a.name}", a.description) for a in connector.actions],
    )


def _connector_source(connector: Connector) -> Source:
    return DERIVED.get(
        connector_key(connector, "source"),
        lambda: source(
            connector.name,
            connector.description,
            [(a.name, a.description) for a in connector.actions],
        ),
    )


def _items(connectors: Sequence[Connector]) -> list[Entry]:
    return [e for c in connectors for e in _action_entries(c)]


class ConnectorMetaTool:
    def __init__(
        self, connectors: Sequence[Connector], backend: ConnectorBackend, query: str = ""
    ) -> None:
        self._connectors = {c.name: c for c in connectors}
        self._backend = backend
        self._index: EntryIndex | None = None
        self._sources = [_connector_source(c) for c in connectors]
        catalog = kind_catalog(query, self._sources, noun="Actions")
        self.tool = ToolDef(
            name=NAME,
            description=f"{_INTRO}\nConnectors:\n{catalog}",
            parameters={
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": list(SUBCOMMANDS)},
                    "connector": name_schema(list(self._connectors), noun="connector"),
                    "action": {"type": "string"},
                    "parameters": {"type": "object"},
                    "query": {"type": "string"},
                },
                "required": ["subcommand"],
            },
            kind="connector",
            target="connector",
        )

    def search(self, query: Any) -> ToolResult:
        if not isinstance(query, str) or not query.strip():
            return ToolResult.fail(
                invalid_arguments(NAME, "'query' is required for subcommand 'search'")
            )
        if self._index is None:
            items = _items(list(self._connectors.values()))
            self._index = index_for(kind_entries(self._sources, items))
        text = search_text(query, self._index, noun="connectors and actions", hint=_SEARCH_HINT)
        return ToolResult.success(text, step="connector:search")

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        subcommand = args.get("subcommand")
        if subcommand == "search":
            return self.search(args.get("query"))
        if subcommand not in SUBCOMMANDS:
            return ToolResult.fail(
                f"Unknown subcommand {subcommand!r}. Valid: {', '.join(SUBCOMMANDS)}."
            )
        name = str(args.get("connector") or "")
        if not name:
            return ToolResult.fail(
                invalid_arguments(NAME, f"'connector' is required for subcommand {subcommand!r}")
            )
        connector = self._connectors.get(name)
        if connector is None:
            return ToolResult.fail(unknown_name("connector", name, list(self._connectors)))
        action_name = args.get("action")
        if subcommand == "discover":
            return self._discover(connector, action_name)
        return await self._execute(connector, action_name, args.get("parameters"), ctx)

    def _find(self, connector: Connector, name: str) -> ConnectorAction | ToolResult:
        for action in connector.actions:
            if action.name == name:
                return action
        names = [a.name for a in connector.actions]
        return ToolResult.fail(
            unknown_name("action", name, names, scope=f"connector {connector.name!r}")
        )

    def _discover(self, connector: Connector, action_name: Any) -> ToolResult:
        if action_name:
            found = self._find(connector, str(action_name))
            if isinstance(found, ToolResult):
                return found
            return ToolResult.success(action_summary(connector, found))
        blocks = [action_summary(connector, a) for a in connector.actions]
        if not blocks:
            return ToolResult.success(f"Connector {connector.name!r} has no actions.")
        hint = "pass action=<name> for one; actions: " + ", ".join(
            a.name for a in connector.actions[DISCOVER_LISTED:]
        )
        shown = capped(blocks, DISCOVER_LISTED, noun="actions", hint=hint)
        return ToolResult.success(clip_output("\n\n".join(shown)))

    async def _execute(
        self, connector: Connector, action_name: Any, parameters: Any, ctx: CallContext
    ) -> ToolResult:
        if not action_name:
            return ToolResult.fail(
                invalid_arguments(NAME, "'action' is required for subcommand 'execute'")
            )
        found = self._find(connector, str(action_name))
        if isinstance(found, ToolResult):
            return found
        params = parameters if parameters is not None else {}
        problem = validate_arguments(found.parameters, params, at="parameters")
        if problem:
            return ToolResult.fail(invalid_arguments(NAME, problem))
        if found.requires_confirmation and not ctx.approved:
            return confirmation_needed(connector, found)
        result = await self._backend.execute(connector, found, params, ctx)
        return with_step(result, action_step(connector, found))


def connector_meta_toolset(
    connectors: Sequence[Connector], backend: ConnectorBackend, query: str = ""
) -> FunctionToolset:
    """The connector meta-tool; `query` (the user's message) ranks a capped stub."""
    tool = ConnectorMetaTool(connectors, backend, query)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="connectors")
