"""A toolset of plain async handlers: what built-ins, meta-tools and legacy tools are made of."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.tools.base import CallContext, ToolDef, ToolResult, Toolset

Handler = Callable[[dict[str, Any], CallContext], Awaitable[ToolResult]]


@dataclass(frozen=True, kw_only=True)
class FunctionTool:
    tool: ToolDef
    handler: Handler


class FunctionToolset(Toolset):
    """Tools backed by handlers; `label` names the source in clash errors."""

    def __init__(self, tools: Iterable[FunctionTool], *, label: str) -> None:
        self.label = label
        self._tools: dict[str, FunctionTool] = {}
        for entry in tools:
            if entry.tool.name in self._tools:
                raise ValueError(f"duplicate tool {entry.tool.name!r} in {label!r}")
            self._tools[entry.tool.name] = entry
        self._defs = {name: entry.tool for name, entry in self._tools.items()}

    def list_tools(self) -> Mapping[str, ToolDef]:
        return self._defs

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        entry = self._tools.get(name)
        if entry is None:
            return ToolResult.fail(f"Unknown tool {name!r} in {self.label!r}")
        return await entry.handler(args, ctx)


def with_step(result: ToolResult, step: str) -> ToolResult:
    """`result` with its progress-tracker step set, unless the back-end already set one."""
    if result.step:
        return result
    return replace(result, step=step)
