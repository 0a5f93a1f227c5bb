"""`connector(subcommand=discover|execute, connector, action?, parameters?)` (SPEC §4.3, §7.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.connectors.models import Connector, ConnectorAction
from app.tools.backends import ConnectorBackend
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import capped, clip_output, compact_json, model_schema, one_line
from app.tools.stubs import connector_stub
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments, validate_arguments

NAME = "connector"
DISCOVER_LISTED = 10
_INTRO = "HTTP APIs. discover: action parameter schemas; execute: run an action with parameters."


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


class ConnectorMetaTool:
    def __init__(self, connectors: Sequence[Connector], backend: ConnectorBackend) -> None:
        self._connectors = {c.name: c for c in connectors}
        self._backend = backend
        catalog = "\n".join(connector_stub(c) for c in connectors)
        self.tool = ToolDef(
            name=NAME,
            description=f"{_INTRO}\nConnectors:\n{catalog}",
            parameters={
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": ["discover", "execute"]},
                    "connector": {"type": "string", "enum": list(self._connectors)},
                    "action": {"type": "string"},
                    "parameters": {"type": "object"},
                },
                "required": ["subcommand", "connector"],
            },
            kind="connector",
            target="connector",
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = str(args.get("connector", ""))
        connector = self._connectors.get(name)
        if connector is None:
            return ToolResult.fail(unknown_name("connector", name, list(self._connectors)))
        action_name = args.get("action")
        match args.get("subcommand"):
            case "discover":
                return self._discover(connector, action_name)
            case "execute":
                return await self._execute(connector, action_name, args.get("parameters"), ctx)
            case other:
                return ToolResult.fail(f"Unknown subcommand {other!r}. Valid: discover, execute.")

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
    connectors: Sequence[Connector], backend: ConnectorBackend
) -> FunctionToolset:
    tool = ConnectorMetaTool(connectors, backend)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="connectors")
