"""Pre-hydration (SPEC §6.3): resolve references in the task before the first model call.

Contract details the SPEC leaves open, fixed here:
- Each resolution call gets its own call id (`prehydrate-<index>`, index in reference
  order); results are paired by that id, never by completion order.
- One deadline (`timeout_s`) covers all calls. Calls still running then are cancelled and
  fail with `Timed out after <N>s` (N without a trailing `.0`).
- The token budget counts item *content* only (not the headers), in reference order. The
  first item that does not fit is cut on a character boundary and ends with
  `...[truncated]` (the marker counts against the budget); if not even one character
  fits, it fails. Every later resolved item fails with `Token budget exhausted`.
- The system message separates the failure note from the last item with one blank line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.agents.config import PreHydration
from app.events import PreHydrationComplete
from app.kit.tokens import count_tokens, truncate_to_tokens
from app.reasoning.extractors import Reference, extract_references
from app.tools.base import ToolDef, ToolResult

CallTool = Callable[[str, str, dict[str, Any]], Awaitable[ToolResult]]
ToolArgs = Callable[[str, Reference], dict[str, Any] | None]

HEADER = "[PRE_HYDRATED_CONTEXT]"
INTRO = "The following references were resolved from the task input:"
TRUNCATION_MARKER = "...[truncated]"
NO_TOOL = "No resolution tool configured"
BUDGET_EXHAUSTED = "Token budget exhausted"
_CANCEL_GRACE_S = 1.0


@dataclass(frozen=True, kw_only=True)
class HydrationItem:
    value: str
    ref_type: str
    ok: bool
    content: str | None = None
    error: str | None = None
    tool: str | None = None
    tokens: int = 0
    truncated: bool = False


@dataclass(frozen=True, kw_only=True)
class HydrationResult:
    items: tuple[HydrationItem, ...] = ()

    @property
    def references_found(self) -> int:
        return len(self.items)

    @property
    def references_resolved(self) -> int:
        return sum(1 for item in self.items if item.ok)

    @property
    def references_failed(self) -> int:
        return self.references_found - self.references_resolved

    @property
    def total_tokens(self) -> int:
        return sum(item.tokens for item in self.items if item.ok)

    @property
    def system_message(self) -> str | None:
        """The one injected system message, or None when nothing resolved."""
        resolved = [item for item in self.items if item.ok]
        if not resolved:
            return None
        lines = [HEADER, INTRO]
        for item in resolved:
            lines += ["", f"--- {item.value} ({item.ref_type}) ---", item.content or ""]
        if self.references_failed:
            lines += ["", f"({self.references_failed} references could not be resolved)"]
        return "\n".join(lines)

    def event(self) -> PreHydrationComplete | None:
        """The `pre_hydration_complete` event; None when no reference was found."""
        if not self.items:
            return None
        return PreHydrationComplete(
            references_found=self.references_found,
            references_resolved=self.references_resolved,
            references_failed=self.references_failed,
            total_tokens=self.total_tokens,
        )


def default_tool_args(schema: Mapping[str, Any], ref: Reference) -> dict[str, Any] | None:
    """`{<first required string parameter>: ref.value}`, or None when there is none.

    A schema that requires nothing (`read_skill(name?, search?)`) uses its first string
    parameter.
    """
    properties = schema.get("properties") or {}
    for param in schema.get("required") or list(properties):
        spec = properties.get(param)
        if not isinstance(spec, Mapping):
            continue
        kind = spec.get("type")
        if kind == "string" or (isinstance(kind, list) and "string" in kind):
            return {param: ref.value}
    return None


def schema_tool_args(tools: Mapping[str, ToolDef]) -> ToolArgs:
    """A `tool_args` callable that applies `default_tool_args` to each tool's schema."""

    def tool_args(tool_name: str, ref: Reference) -> dict[str, Any] | None:
        tool = tools.get(tool_name)
        return default_tool_args(tool.parameters, ref) if tool else None

    return tool_args


def _seconds(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class _Call:
    call_id: str
    tool: str
    args: dict[str, Any]


async def _invoke(call_tool: CallTool, call: _Call) -> ToolResult:
    return await call_tool(call.call_id, call.tool, call.args)


def _outcome(task: asyncio.Task[ToolResult]) -> ToolResult:
    if task.cancelled():
        return ToolResult.fail("Cancelled")
    exc = task.exception()
    if exc is not None:
        return ToolResult.fail(f"{type(exc).__name__}: {exc}")
    return task.result()


async def _resolve_all(
    calls: list[_Call], call_tool: CallTool, timeout_s: float
) -> dict[str, ToolResult]:
    """Run every call concurrently under one deadline; results keyed by call id."""
    if not calls:
        return {}
    tasks = {asyncio.create_task(_invoke(call_tool, call)): call.call_id for call in calls}
    try:
        _, pending = await asyncio.wait(tasks, timeout=timeout_s)
    finally:
        # Also reached when the run itself is cancelled: never leave calls running.
        late = [task for task in tasks if not task.done()]
        for task in late:
            task.cancel()
        if late:
            await asyncio.wait(late, timeout=_CANCEL_GRACE_S)
    timed_out = ToolResult.fail(f"Timed out after {_seconds(timeout_s)}s")
    return {
        call_id: timed_out if task in pending else _outcome(task) for task, call_id in tasks.items()
    }


def _fit(content: str, remaining: int) -> tuple[str, int, bool] | None:
    """Content within `remaining` tokens: (text, tokens, truncated), or None if nothing fits."""
    tokens = count_tokens(content)
    if tokens <= remaining:
        return content, tokens, False
    room = remaining - count_tokens(TRUNCATION_MARKER)
    while room > 0:
        prefix = truncate_to_tokens(content, room)
        if not prefix:
            return None
        cut = prefix + TRUNCATION_MARKER
        used = count_tokens(cut)
        if used <= remaining:
            return cut, used, True
        room -= used - remaining  # merging at the seam can shift counts; shrink and retry
    return None


def _apply_budget(items: list[HydrationItem], budget: int) -> list[HydrationItem]:
    remaining = budget
    exhausted = False
    out: list[HydrationItem] = []
    for item in items:
        if not item.ok:
            out.append(item)
            continue
        fitted = None if exhausted else _fit(item.content or "", remaining)
        if fitted is None:
            exhausted = True
            out.append(_failed(item, BUDGET_EXHAUSTED))
            continue
        text, used, truncated = fitted
        remaining -= used
        exhausted = truncated
        out.append(replace(item, content=text, tokens=used, truncated=truncated))
    return out


def _failed(item: HydrationItem, error: str) -> HydrationItem:
    return replace(item, ok=False, content=None, error=error, tokens=0, truncated=False)


def _plan(
    refs: list[Reference], config: PreHydration, tool_args: ToolArgs
) -> list[HydrationItem | _Call]:
    """Per reference, either a finished (failed) item or the call that will resolve it."""
    slots: list[HydrationItem | _Call] = []
    for index, ref in enumerate(refs):
        tool = config.resolution_tools.get(ref.ref_type)
        item = HydrationItem(value=ref.value, ref_type=ref.ref_type, ok=False, tool=tool)
        args = tool_args(tool, ref) if tool else None
        if tool is None:
            slots.append(_failed(item, NO_TOOL))
        elif args is None:
            slots.append(_failed(item, f"Resolution tool {tool!r} has no string parameter"))
        else:
            slots.append(_Call(f"prehydrate-{index}", tool, args))
    return slots


def _settle(ref: Reference, call: _Call, result: ToolResult) -> HydrationItem:
    item = HydrationItem(value=ref.value, ref_type=ref.ref_type, ok=result.ok, tool=call.tool)
    if result.ok:
        return replace(item, content=result.output)
    return _failed(item, result.error or f"Resolution tool {call.tool!r} failed")


async def prehydrate(
    message: str,
    config: PreHydration,
    *,
    call_tool: CallTool,
    tool_args: ToolArgs,
) -> HydrationResult:
    """Extract references from `message`, resolve them concurrently, fit them to the budget."""
    refs = extract_references(
        message, custom_patterns=config.custom_patterns, max_references=config.max_references
    )
    slots = _plan(refs, config, tool_args)
    calls = [slot for slot in slots if isinstance(slot, _Call)]
    results = await _resolve_all(calls, call_tool, config.timeout_s)
    items = [
        slot if isinstance(slot, HydrationItem) else _settle(ref, slot, results[slot.call_id])
        for ref, slot in zip(refs, slots, strict=True)
    ]
    return HydrationResult(items=tuple(_apply_budget(items, config.max_context_tokens)))
