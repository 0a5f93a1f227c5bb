"""The pipeline preview behind `GET /api/v1/agents/{id}/toolset?query=`.

See docs/contract.md §3, §4.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from app.agents.models import Agent
from app.config import Settings
from app.kit.tokens import count_json_tokens, count_tokens
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import ResolvedModes
from app.pipeline.selection import LlmSelector, local_rank
from app.pipeline.sources.backends import Backends
from app.pipeline.toolset import AssembledToolset
from app.tools.meta.request_tools import RequestToolsToolset


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class TokenCounts(_Model):
    system_prompt: int
    tools: int
    total: int


class SelectionPreview(_Model):
    strategy: str
    total: int
    threshold: int
    max: int
    pinned: list[str]
    selected: list[str]
    scores: list[float | None]
    """Relevance of each `selected` tool (None where the llm chose it or the co-use prior
    promoted it); the ranker keeps nothing below its minimum score."""
    deferred: list[str]
    """What `request_tools` lists: at most 20 deferred tools, those relevant to the query
    first (the full list would be thousands of names)."""
    deferred_total: int
    elapsed_ms: float
    fallback: str | None = None


class ToolsetPreview(_Model):
    modes: dict[str, str]
    system_prompt: str
    tools: list[dict[str, Any]]
    """OpenAI function shape, exactly as sent to the model."""
    selection: SelectionPreview | None
    tokens: TokenCounts
    """For the resolved modes (what the model receives)."""
    legacy_modes: dict[str, str]
    legacy_tokens: TokenCounts
    """All-legacy baseline (skills inline, one tool per leaf, no runtime selection)."""
    saved_tokens: int
    saved_ratio: float
    """1 - tokens.total / legacy_tokens.total (0 when the baseline is empty)."""


def count_prompt_tokens(system_prompt: str, tools: list[dict[str, Any]]) -> TokenCounts:
    """Prompt-resident tokens: the system prompt plus the tool schemas as serialised JSON."""
    prompt = count_tokens(system_prompt)
    schemas = count_json_tokens(tools) if tools else 0
    return TokenCounts(system_prompt=prompt, tools=schemas, total=prompt + schemas)


def selection_preview(toolset: AssembledToolset, query: str) -> SelectionPreview | None:
    result, active, config = toolset.selection, toolset.active_set, toolset.config
    if result is None or active is None:
        return None
    listing = RequestToolsToolset(
        active, query, rank=local_rank(config.selection_strategy, config.index_inline_max)
    ).listing()
    return SelectionPreview(
        strategy=result.strategy.value,
        total=result.total,
        threshold=result.threshold,
        max=result.max_tools,
        pinned=list(result.pinned),
        selected=list(result.selected),
        scores=list(result.scores) or [None] * len(result.selected),
        deferred=[t.name for t in listing],
        deferred_total=len(result.deferred),
        elapsed_ms=round(result.elapsed_ms, 3),
        fallback=result.fallback,
    )


def _counts(toolset: AssembledToolset) -> TokenCounts:
    return count_prompt_tokens(toolset.system_prompt, toolset.openai_tools())


async def preview_toolset(
    agent: Agent,
    settings: Settings,
    backends: Backends,
    query: str,
    *,
    selector: LlmSelector | None = None,
) -> ToolsetPreview:
    """Resolved modes, prompt, tools and selection, with token counts against all-legacy."""
    current = await assemble_toolset(agent, settings, backends, query, selector=selector)
    baseline_modes = ResolvedModes.all_legacy()
    baseline = await assemble_toolset(
        agent, settings, backends, query, modes=baseline_modes, select=False
    )
    tokens = _counts(current)
    legacy_tokens = _counts(baseline)
    saved = legacy_tokens.total - tokens.total
    ratio = saved / legacy_tokens.total if legacy_tokens.total else 0.0
    return ToolsetPreview(
        modes=current.modes.as_dict(),
        system_prompt=current.system_prompt,
        tools=current.openai_tools(),
        selection=selection_preview(current, query),
        tokens=tokens,
        legacy_modes=baseline_modes.as_dict(),
        legacy_tokens=legacy_tokens,
        saved_tokens=saved,
        saved_ratio=round(ratio, 4),
    )
