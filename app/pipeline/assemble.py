"""The per-request tool pipeline (docs/contract.md §4.1): eight small steps, each tested on its own.

1 built-ins, plus `knowledge` over the agent's knowledge bases · 2 category filter · 3-6 one
step per kind of stored source (connectors, databases, MCP servers, then `call_agent` over the
delegates, skills; `sources/kinds.py`) · 7 tool profile · 8 runtime selection.
Each kind gives one meta-tool in progressive mode or its legacy tools; every step composes
toolsets (docs/architecture.md, rule "compose, do not branch") instead of editing them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence

from app.agents.config import Knowledge, ToolProfile
from app.agents.models import Agent
from app.config import Settings
from app.pipeline.couse import CoUsePrior
from app.pipeline.mode import ResolvedModes, RunConfig, run_config
from app.pipeline.selection import LlmSelector, SelectionResult, local_rank, select_tools
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.builtins import builtin_toolset
from app.pipeline.sources.kinds import SOURCES, KindPart
from app.pipeline.sources.knowledge import KIND as KNOWLEDGE_KIND
from app.pipeline.sources.knowledge import NAME as KNOWLEDGE_NAME
from app.pipeline.sources.knowledge import knowledge_toolset
from app.pipeline.toolset import AssembledToolset
from app.reasoning.profile import apply_profile
from app.tools.base import ToolDef, Toolset
from app.tools.combined import CombinedToolset
from app.tools.meta.request_tools import RequestToolsToolset
from app.tools.names import NameAllocator
from app.tools.wrappers import ActiveSetToolset, FilteredToolset

KINDS = ("builtin", KNOWLEDGE_KIND, *(source.kind for source in SOURCES))
META_NAMES = frozenset({*(source.meta_name for source in SOURCES), KNOWLEDGE_NAME, "request_tools"})


# --- step 1 and 2 -------------------------------------------------------------------------


def step_builtins(backends: Backends) -> Toolset:
    """Step 1: `http_fetch`, `recall_knowledge`."""
    return builtin_toolset(backends)


def step_knowledge(
    agent: Agent, backends: Backends, config: Knowledge | None, allowed: frozenset[str]
) -> Toolset | None:
    """Step 1b: one `knowledge` tool over the agent's knowledge bases (category `knowledge`)."""
    if KNOWLEDGE_KIND not in allowed:
        return None
    min_score = (config or Knowledge()).min_score
    return knowledge_toolset(agent.knowledge_bases, backends.knowledge, min_score=min_score)


def allowed_kinds(tool_categories: Sequence[object] | None) -> frozenset[str]:
    """`agent.tool_categories` → allowed kinds; null means every kind, unknown values ignored."""
    if tool_categories is None:
        return frozenset(KINDS)
    return frozenset(str(k) for k in tool_categories) & frozenset(KINDS)


def step_category_filter(builtins: Toolset, allowed: frozenset[str]) -> Toolset:
    """Step 2: drop built-ins whose kind the agent does not allow (steps 3-6 check `allowed`)."""
    return FilteredToolset(
        builtins, lambda tool: tool.kind in allowed, reason="category not allowed"
    )


# --- step 7 and 8 -------------------------------------------------------------------------


def step_profile(toolset: Toolset, profile: ToolProfile | None) -> Toolset:
    """Step 7: the agent's tool profile (§6.1) over the names the model sees."""
    if profile is None:
        return toolset
    kept = apply_profile(
        list(toolset.list_tools().values()),
        profile,
        name=lambda t: t.name,
        description=lambda t: t.description,
    )
    return FilteredToolset.keeping(
        toolset, (t.name for t in kept), reason="excluded by its tool profile"
    )


async def step_selection(
    toolset: Toolset,
    query: str,
    config: RunConfig,
    *,
    pinned: frozenset[str],
    selector: LlmSelector | None = None,
    prior: Callable[[], Awaitable[CoUsePrior | None]] | None = None,
) -> tuple[Toolset, SelectionResult | None, ActiveSetToolset | None]:
    """Step 8: above the threshold, an active set of the top tools plus `request_tools`.

    `prior` loads the agent's co-use prior (only called above the threshold)."""
    result = await select_tools(
        query,
        list(toolset.list_tools().values()),
        pinned=pinned,
        threshold=config.selection_threshold,
        max_tools=config.selection_max,
        strategy=config.selection_strategy,
        selector=selector,
        prior=prior,
        inline_max=config.index_inline_max,
    )
    if result is None:
        return toolset, None, None
    active = ActiveSetToolset(toolset, result.active)
    # Ranks what selection ranked (the same cached ranker), minus what is loaded.
    pool = selection_candidates(toolset, pinned)
    request_tools = RequestToolsToolset(
        active,
        query,
        rank=local_rank(config.selection_strategy, config.index_inline_max),
        pool=pool,
    )
    visible = CombinedToolset([active, request_tools], label="selected")
    return visible, result, active


def build_system_prompt(instructions: str, sections: Iterable[str]) -> str:
    """Agent instructions, then each non-empty section, separated by blank lines."""
    parts = [instructions.strip(), *(s.strip() for s in sections)]
    return "\n\n".join(p for p in parts if p)


# --- the whole pipeline -------------------------------------------------------------------


def _kind_parts(
    agent: Agent, modes: ResolvedModes, backends: Backends, allowed: frozenset[str], query: str
) -> list[KindPart]:
    names = NameAllocator(reserved=META_NAMES | {"http_fetch", "recall_knowledge"})
    return [
        source.part(source.rows(agent), source.mode(modes), backends, names, query)
        for source in SOURCES
        if source.kind in allowed
    ]


async def assemble_toolset(
    agent: Agent,
    settings: Settings,
    backends: Backends,
    query: str,
    *,
    config: RunConfig | None = None,
    modes: ResolvedModes | None = None,
    selector: LlmSelector | None = None,
    select: bool = True,
) -> AssembledToolset:
    """Build what the model receives for this agent and message.

    `config` is the run's resolved configuration (resolved here from the agent when not
    given); `modes` overrides its modes (the preview's all-legacy baseline); `select=False`
    skips step 8. `agent` must have connectors (with actions), databases, mcp_servers,
    skills and knowledge_bases loaded.
    """
    config = config or run_config(agent.model_config_json, settings)
    modes = modes or config.modes
    allowed = allowed_kinds(agent.tool_categories)
    builtins = step_category_filter(step_builtins(backends), allowed)
    knowledge = step_knowledge(agent, backends, config.knowledge, allowed)
    parts = _kind_parts(agent, modes, backends, allowed, query)
    sources = [
        builtins,
        *([knowledge] if knowledge is not None else []),
        *(p.toolset for p in parts if p.toolset is not None),
    ]
    base = CombinedToolset(sources, label="agent")
    full = step_profile(base, config.tool_profile)
    pinned = frozenset().union(*(p.pinned for p in parts))
    visible, selection, active = (full, None, None)
    if select:
        couse = backends.couse
        visible, selection, active = await step_selection(
            full,
            query,
            config,
            pinned=pinned,
            selector=selector,
            prior=(lambda: couse.prior(agent.id)) if couse is not None else None,
        )
    return AssembledToolset(
        config=config,
        modes=modes,
        system_prompt=build_system_prompt(agent.instructions or "", (p.prompt for p in parts)),
        base=base,
        full=full,
        visible=visible,
        selection=selection,
        active_set=active,
        pinned=pinned,
    )


def selection_candidates(toolset: Toolset, pinned: frozenset[str]) -> list[ToolDef]:
    """What runtime selection ranks: every tool but the pinned meta-tools, in catalog order."""
    return [t for t in toolset.list_tools().values() if t.name not in pinned]
