"""`request_tools(tool_names)`: load deferred tools into the active set mid-run.

See docs/contract.md §4.4.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.tools.base import CallContext, ToolDef, ToolResult, Toolset
from app.tools.render import one_line
from app.tools.wrappers import Activation, ActiveSetToolset

NAME = "request_tools"
CATALOG_DESCRIPTION_CHARS = 80
_INTRO = (
    "Load more tools for this task by name; they stay available for the rest of the run."
    " Tools not loaded yet:"
)
_ALL_LOADED = "Load more tools by name. All tools are already loaded."


def catalog_line(tool: ToolDef) -> str:
    """`- name: description` with the description cut to 80 chars."""
    text = one_line(tool.description, CATALOG_DESCRIPTION_CHARS)
    return f"- {tool.name}: {text}" if text else f"- {tool.name}"


def activation_text(activation: Activation) -> str:
    """`Loaded: a, b` / `Already loaded: c` / `Not found: x (did you mean 'y'?)`, one per line."""
    lines: list[str] = []
    if activation.loaded:
        lines.append("Loaded: " + ", ".join(activation.loaded))
    if activation.already:
        lines.append("Already loaded: " + ", ".join(activation.already))
    if activation.not_found:
        missing = [
            f"{name} (did you mean {close!r}?)" if close else name
            for name, close in activation.not_found
        ]
        lines.append("Not found: " + ", ".join(missing))
    return "\n".join(lines)


class RequestToolsToolset(Toolset):
    """One tool whose description is the catalog of what `active` has not loaded yet."""

    label = NAME

    def __init__(self, active: ActiveSetToolset) -> None:
        self.active = active
        self._cache: tuple[int, ToolDef] | None = None

    def _tool(self) -> ToolDef:
        deferred = self.active.deferred()
        if self._cache is not None and self._cache[0] == len(deferred):
            return self._cache[1]
        description = (
            "\n".join([_INTRO, *(catalog_line(t) for t in deferred)]) if deferred else _ALL_LOADED
        )
        tool = ToolDef(
            name=NAME,
            description=description,
            parameters={
                "type": "object",
                "properties": {
                    "tool_names": {"type": "array", "items": {"type": "string"}, "minItems": 1}
                },
                "required": ["tool_names"],
                "additionalProperties": False,
            },
            kind="meta",
            target="request_tools",
        )
        self._cache = (len(deferred), tool)
        return tool

    def list_tools(self) -> Mapping[str, ToolDef]:
        return {NAME: self._tool()}

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if name != NAME:
            return ToolResult.fail(f"Unknown tool {name!r}")
        activation = self.active.activate(str(n) for n in args.get("tool_names") or [])
        text = activation_text(activation)
        if not activation.loaded and not activation.already:
            return ToolResult.fail(text, step=NAME)
        return ToolResult(ok=True, output=text, step=NAME, loaded_tools=activation.loaded)
