"""CombinedToolset: several sources behind one interface; name clashes are reported precisely."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.errors import Conflict
from app.tools.base import CallContext, ToolDef, ToolResult, Toolset


class ToolNameClash(Conflict):
    """Two sources expose the same tool name."""


def source_label(source: Toolset) -> str:
    label = getattr(source, "label", None)
    return label if isinstance(label, str) else type(source).__name__


class CombinedToolset(Toolset):
    """Merge sources in order; the union is recomputed on each listing (sources may be dynamic)."""

    def __init__(self, sources: Sequence[Toolset], *, label: str = "combined") -> None:
        self.label = label
        self.sources = tuple(sources)
        self._owners: dict[str, Toolset] = {}
        self.list_tools()

    def list_tools(self) -> Mapping[str, ToolDef]:
        merged: dict[str, ToolDef] = {}
        owners: dict[str, Toolset] = {}
        for source in self.sources:
            for name, tool in source.list_tools().items():
                if name in owners:
                    raise ToolNameClash(
                        f"Tool name {name!r} is provided by both {source_label(owners[name])!r}"
                        f" and {source_label(source)!r}"
                    )
                merged[name] = tool
                owners[name] = source
        self._owners = owners
        return merged

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        owner = self._owners.get(name)
        if owner is None:
            self.list_tools()
            owner = self._owners.get(name)
        if owner is None:
            return ToolResult.fail(f"Unknown tool {name!r}")
        return await owner.call_tool(name, args, ctx)

    async def aclose(self) -> None:
        for source in self.sources:
            await source.aclose()
