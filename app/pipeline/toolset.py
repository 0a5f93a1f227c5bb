"""`AssembledToolset`: the pipeline's output and the loop's single entry point for tools."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.pipeline.mode import ResolvedModes, RunConfig
from app.pipeline.selection import SelectionResult
from app.tools.base import CallContext, ToolDef, ToolResult, Toolset
from app.tools.guard import safe_call
from app.tools.suggest import did_you_mean, unknown_name
from app.tools.validation import check_arguments, invalid_arguments
from app.tools.wrappers import Activation, ActiveSetToolset


@dataclass(kw_only=True)
class AssembledToolset:
    """What one run uses: prompt, the tools the model sees now, and a guarded dispatcher.

    `base` is every tool built for the agent, `full` what its profile allows (the set
    `request_tools` and pre-hydration draw from), `visible` what the model receives.
    """

    config: RunConfig
    modes: ResolvedModes
    system_prompt: str
    base: Toolset
    full: Toolset
    visible: Toolset
    selection: SelectionResult | None = None
    active_set: ActiveSetToolset | None = None
    pinned: frozenset[str] = frozenset()
    """Meta-tools runtime selection never ranks away."""

    @property
    def tools(self) -> list[ToolDef]:
        """The tools the model receives this turn (grows after `request_tools`)."""
        return list(self.visible.list_tools().values())

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.to_openai() for tool in self.tools]

    def full_tools(self) -> Mapping[str, ToolDef]:
        return self.full.list_tools()

    def activate(self, names: Iterable[str]) -> Activation:
        """Load tools into the active set (replaying a journal's `tools_loaded` events)."""
        if self.active_set is None:
            return Activation(already=tuple(n for n in names if n in self.full.list_tools()))
        return self.active_set.activate(names)

    async def call(
        self, name: str, args: Any, ctx: CallContext, *, active_only: bool = True
    ) -> ToolResult:
        """Validate, then run one tool; every failure comes back as `ToolResult.fail`.

        `active_only=False` reaches any tool the profile allows (pre-hydration's resolvers).
        """
        source = self.visible if active_only else self.full
        tool = source.list_tools().get(name)
        if tool is None:
            return await self._refuse(name, source, ctx)
        # Validated once, here; a connector action's schema refuses names it does not list.
        checked = check_arguments(tool.parameters, args, closed=tool.kind == "connector")
        if isinstance(checked, str):
            return ToolResult.fail(invalid_arguments(name, checked))
        return await safe_call(source, name, checked if isinstance(args, dict) else args, ctx)

    async def _refuse(self, name: str, source: Toolset, ctx: CallContext) -> ToolResult:
        """Why `name` cannot run: not loaded yet, filtered out, or unknown (with a near miss)."""
        full = self.full.list_tools()
        if self.active_set is not None and name in full:
            return await safe_call(self.active_set, name, {}, ctx)
        if name in self.base.list_tools():
            return await safe_call(self.full, name, {}, ctx)
        visible = list(source.list_tools())
        message = unknown_name("tool", name, visible, suggest_from=list(full))
        close = did_you_mean(name, full)
        if close and close[0] not in visible:
            message += " It is not loaded yet: call request_tools first."
        return ToolResult.fail(message)

    async def aclose(self) -> None:
        await self.base.aclose()
