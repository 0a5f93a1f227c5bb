"""Cross-cutting behaviour as wrappers around a source, never `if`s inside one.

See docs/architecture.md, rule "compose, do not branch".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.tools.base import CallContext, ToolDef, ToolResult, Toolset
from app.tools.suggest import did_you_mean


class WrapperToolset(Toolset):
    """Delegates everything to `inner`; subclasses override what they change."""

    def __init__(self, inner: Toolset) -> None:
        self.inner = inner

    @property
    def label(self) -> str:
        label = getattr(self.inner, "label", None)
        return label if isinstance(label, str) else type(self.inner).__name__

    def list_tools(self) -> Mapping[str, ToolDef]:
        return self.inner.list_tools()

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        return await self.inner.call_tool(name, args, ctx)

    async def aclose(self) -> None:
        await self.inner.aclose()


class FilteredToolset(WrapperToolset):
    """Only tools matching `predicate`; filtered-out tools are refused at dispatch too."""

    def __init__(
        self, inner: Toolset, predicate: Callable[[ToolDef], bool], *, reason: str = "filtered"
    ) -> None:
        super().__init__(inner)
        self.predicate = predicate
        self.reason = reason

    @classmethod
    def keeping(cls, inner: Toolset, names: Iterable[str], *, reason: str) -> FilteredToolset:
        kept = frozenset(names)
        return cls(inner, lambda tool: tool.name in kept, reason=reason)

    def list_tools(self) -> Mapping[str, ToolDef]:
        return {n: t for n, t in self.inner.list_tools().items() if self.predicate(t)}

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tool = self.inner.list_tools().get(name)
        if tool is not None and not self.predicate(tool):
            return ToolResult.fail(f"Tool {name!r} is not available to this agent ({self.reason})")
        return await self.inner.call_tool(name, args, ctx)


@dataclass(frozen=True, kw_only=True)
class Activation:
    """What `ActiveSetToolset.activate` did with each requested name."""

    loaded: tuple[str, ...] = ()
    already: tuple[str, ...] = ()
    not_found: tuple[tuple[str, str | None], ...] = ()
    """(requested name, closest known name or None)."""


class ActiveSetToolset(WrapperToolset):
    """The tools the model currently sees: a subset of `inner` that grows via `activate`.

    Runtime selection starts it with the top-k; `request_tools` adds the rest on demand,
    for the remainder of the run (the loop replays `tools_loaded` events to rebuild it).
    """

    def __init__(self, inner: Toolset, active: Iterable[str]) -> None:
        super().__init__(inner)
        known = inner.list_tools()
        self._active = {name for name in active if name in known}

    @property
    def active_names(self) -> list[str]:
        return [name for name in self.inner.list_tools() if name in self._active]

    def list_tools(self) -> Mapping[str, ToolDef]:
        return {n: t for n, t in self.inner.list_tools().items() if n in self._active}

    def deferred(self) -> list[ToolDef]:
        return [t for n, t in self.inner.list_tools().items() if n not in self._active]

    def activate(self, names: Iterable[str]) -> Activation:
        known = self.inner.list_tools()
        loaded: list[str] = []
        already: list[str] = []
        missing: list[tuple[str, str | None]] = []
        for name in dict.fromkeys(names):
            if name not in known:
                close = did_you_mean(name, known)
                missing.append((name, close[0] if close else None))
            elif name in self._active:
                already.append(name)
            else:
                self._active.add(name)
                loaded.append(name)
        return Activation(loaded=tuple(loaded), already=tuple(already), not_found=tuple(missing))

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if name not in self._active and name in self.inner.list_tools():
            return ToolResult.fail(
                f"Tool {name!r} is not loaded yet; call request_tools with"
                f" tool_names=[{name!r}] first, then call it."
            )
        return await self.inner.call_tool(name, args, ctx)
