"""`connector(subcommand=discover|execute|search, connector?, action?, parameters?, query?)`.

discover and execute work on one connector; search ranks every connector and action.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from app.connectors.actions import action_step
from app.connectors.backend import ConnectorBackend
from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import TAGS
from app.pipeline.sources.disclosure import (
    Entry,
    Source,
    index_for,
    kind_entries,
    parameter_texts,
    source,
)
from app.pipeline.sources.meta_base import KindMetaTool
from app.pipeline.sources.stubs import connector_key
from app.tools.base import CallContext, SearchHints, ToolDef, ToolResult
from app.tools.cache import DERIVED
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, compact_json, model_schema, one_line
from app.tools.suggest import unknown_name
from app.tools.validation import check_arguments, invalid_arguments

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


def confirmation_needed(connector: Connector, action: ConnectorAction) -> ToolResult:
    """An action marked `requires_confirmation` runs only once a person approved the call."""
    step = action_step(connector, action)
    return ToolResult.needs_approval(f"{step} requires confirmation", step=step)


def action_hints(connector: Connector, action: ConnectorAction) -> SearchHints:
    """What the rankers read from an action besides its text: method, path, OpenAPI tags
    (kept by the import as `x-tags`) and the connector."""
    tags = action.parameters.get(TAGS) if isinstance(action.parameters, dict) else None
    return SearchHints(
        source=connector.name,
        source_description=connector.description or "",
        method=action.method,
        path=action.path,
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
    )


def _action_entry(connector: Connector, action: ConnectorAction) -> Entry:
    return Entry(
        f"{connector.name}/{action.name}",
        one_line(action.description) or f"{action.method} {action.path}",
        action_hints(connector, action),
        parameter_texts(model_schema(action.parameters)),
    )


def _action_entries(connector: Connector) -> list[Entry]:
    return DERIVED.get(
        connector_key(connector, "search"),
        lambda: [_action_entry(connector, a) for a in connector.actions],
    )


def connector_search_tools(connectors: Sequence[Connector]) -> list[ToolDef]:
    """What the `connector` meta-tool's `search` ranks over these connectors, as its ranker
    sees them: the warmer builds that ranker when sources change (`warm.py`), so an agent's
    first search finds it built."""
    sources = [_connector_source(c) for c in connectors]
    items = [e for c in connectors for e in _action_entries(c)]
    return index_for(kind_entries(sources, items)).tools


def _connector_source(connector: Connector) -> Source:
    return DERIVED.get(
        connector_key(connector, "source"),
        lambda: source(
            connector.name,
            connector.description,
            [(a.name, a.description) for a in connector.actions],
        ),
    )


class ConnectorMetaTool(KindMetaTool[Connector]):
    name = NAME
    row_field = "connector"
    row_label = "connector"
    intro = _INTRO
    heading = "Connectors"
    catalog_noun = "Actions"
    search_noun = "connectors and actions"
    search_hint = _SEARCH_HINT
    subcommands = SUBCOMMANDS
    properties: ClassVar[dict[str, Any]] = {
        "action": {"type": "string"},
        "parameters": {"type": "object"},
    }

    def __init__(
        self,
        connectors: Sequence[Connector],
        backend: ConnectorBackend,
        query: str = "",
        inline_max: int | None = None,
    ) -> None:
        super().__init__(connectors, query, inline_max)
        self._backend = backend

    def name_of(self, row: Connector) -> str:
        return row.name

    def source_of(self, row: Connector) -> Source:
        return _connector_source(row)

    def entries_of(self, row: Connector) -> list[Entry]:
        return _action_entries(row)

    async def run(
        self, subcommand: str, row: Connector, args: dict[str, Any], ctx: CallContext
    ) -> ToolResult:
        if subcommand == "discover":
            return self._discover(row, args.get("action"))
        return await self._execute(row, args.get("action"), args.get("parameters"), ctx)

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
        checked = check_arguments(found.parameters, params, at="parameters", closed=True)
        if isinstance(checked, str):
            return ToolResult.fail(invalid_arguments(NAME, checked))
        if found.requires_confirmation and not ctx.approved:
            return confirmation_needed(connector, found)
        result = await self._backend.execute(connector, found, checked, ctx)
        return with_step(result, action_step(connector, found))


def connector_meta_toolset(
    connectors: Sequence[Connector],
    backend: ConnectorBackend,
    query: str = "",
    inline_max: int | None = None,
) -> FunctionToolset:
    """The connector meta-tool; `query` (the user's message) ranks a capped stub."""
    tool = ConnectorMetaTool(connectors, backend, query, inline_max)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="connectors")
