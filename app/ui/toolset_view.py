"""The agent page's tool-set preview: the API's preview plus a per-kind token breakdown."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.agents.models import Agent
from app.config import Settings
from app.kit.tokens import count_json_tokens, count_tokens
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import ResolvedModes
from app.pipeline.preview import ToolsetPreview, preview_toolset
from app.pipeline.selection import LlmSelector
from app.pipeline.toolset import AssembledToolset
from app.tools.backends import Backends

CHART_WIDTH = 360
"""Pixels of the longest bar."""


@dataclass(frozen=True)
class KindBar:
    kind: str
    progressive: int
    legacy: int
    progressive_px: int
    legacy_px: int


@dataclass(frozen=True)
class ToolsetView:
    preview: ToolsetPreview
    bars: list[KindBar]


def _by_kind(
    system_prompt: str, tools: list[dict[str, Any]], kinds: dict[str, str]
) -> dict[str, int]:
    """Tokens of the system prompt and of each kind's tool schemas."""
    counts: dict[str, int] = {"system prompt": count_tokens(system_prompt)}
    for tool in tools:
        kind = kinds.get(str(tool.get("function", {}).get("name")), "other")
        counts[kind] = counts.get(kind, 0) + count_json_tokens(tool)
    return counts


def _kinds(toolset: AssembledToolset) -> dict[str, str]:
    return {name: tool.kind for name, tool in toolset.full_tools().items()}


async def toolset_view(
    agent: Agent,
    settings: Settings,
    backends: Backends,
    query: str,
    *,
    selector: LlmSelector | None = None,
) -> ToolsetView:
    """The same preview as `GET /agents/{id}/toolset`, with bars per kind.

    The progressive bars count the tools the preview sends, the legacy ones the all-legacy
    baseline; each kind's schemas are counted on their own (the totals, which count the whole
    list at once as the model receives it, come from the preview itself).
    """
    preview = await preview_toolset(agent, settings, backends, query, selector=selector)
    current = await assemble_toolset(agent, settings, backends, query, select=False)
    baseline = await assemble_toolset(
        agent, settings, backends, query, modes=ResolvedModes.all_legacy(), select=False
    )
    now = _by_kind(preview.system_prompt, preview.tools, _kinds(current))
    legacy = _by_kind(baseline.system_prompt, baseline.openai_tools(), _kinds(baseline))
    kinds = list(dict.fromkeys([*now, *legacy]))
    peak = max([*now.values(), *legacy.values(), 1])
    bars = [
        KindBar(
            kind=kind,
            progressive=now.get(kind, 0),
            legacy=legacy.get(kind, 0),
            progressive_px=round(CHART_WIDTH * now.get(kind, 0) / peak),
            legacy_px=round(CHART_WIDTH * legacy.get(kind, 0) / peak),
        )
        for kind in kinds
    ]
    return ToolsetView(preview=preview, bars=bars)
