"""Runtime selection (SPEC §4.4): above the threshold keep the top `max` tools for the query.

The rest stay reachable through `request_tools`, whose description lists the best-ranked
of them and which searches the others. Meta-tools are pinned (never ranked away): each is
the gateway to a whole kind of resource.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from app.config import SelectionStrategy
from app.pipeline.hybrid import HybridRanker
from app.pipeline.ranker import LexicalRanker
from app.tools.base import ToolDef

logger = logging.getLogger(__name__)

LlmSelector = Callable[[str, Sequence[ToolDef], int], Awaitable[list[str]]]
"""`select_with_llm(query, tools, k) -> names`: one model call; the lead wires it."""


@dataclass(frozen=True, kw_only=True)
class SelectionResult:
    strategy: SelectionStrategy
    """The strategy that produced `selected` (lexical after an llm fallback)."""
    total: int
    threshold: int
    max_tools: int
    pinned: tuple[str, ...]
    selected: tuple[str, ...]
    """Ranked tools kept, best first (pinned tools not included)."""
    deferred: tuple[str, ...]
    """Tools left for `request_tools`, in catalog order."""
    elapsed_ms: float
    fallback: str | None = None
    """Why the llm strategy fell back to lexical, if it did."""

    @property
    def active(self) -> tuple[str, ...]:
        return (*self.pinned, *self.selected)


def needs_selection(total: int, threshold: int) -> bool:
    return total > threshold


def rank_lexical(query: str, candidates: Sequence[ToolDef], k: int) -> list[str]:
    """Top-k names by the local ranker; ties keep catalog order."""
    if not candidates:
        return []
    return [s.name for s in LexicalRanker.cached(candidates).rank(query, k)]


def rank_hybrid(query: str, candidates: Sequence[ToolDef], k: int) -> list[str]:
    """Top-k names by lexical scores fused with static word-embedding similarity."""
    if not candidates:
        return []
    return [s.name for s in HybridRanker.cached(candidates).rank(query, k)]


def local_rank(strategy: SelectionStrategy) -> Callable[[str, Sequence[ToolDef], int], list[str]]:
    """The local (no model call) ranker for a strategy: hybrid for hybrid, else lexical."""
    return rank_hybrid if strategy is SelectionStrategy.HYBRID else rank_lexical


async def rank_llm(
    query: str, candidates: Sequence[ToolDef], k: int, selector: LlmSelector
) -> list[str]:
    """The selector's names, unknown or repeated ones dropped, capped at k."""
    known = {t.name for t in candidates}
    names = await selector(query, candidates, k)
    return [n for n in dict.fromkeys(names) if n in known][:k]


async def _choose(
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    strategy: SelectionStrategy,
    selector: LlmSelector | None,
) -> tuple[list[str], SelectionStrategy, str | None]:
    if strategy is SelectionStrategy.LLM:
        if selector is None:
            reason = "no LLM selector configured"
        else:
            try:
                chosen = await rank_llm(query, candidates, k, selector)
            except Exception as exc:
                logger.warning("llm tool selection failed: %s", type(exc).__name__)
                reason = f"llm selection failed ({type(exc).__name__})"
            else:
                if chosen:
                    return chosen, SelectionStrategy.LLM, None
                reason = "llm selection returned no known tool names"
        return rank_lexical(query, candidates, k), SelectionStrategy.LEXICAL, reason
    return local_rank(strategy)(query, candidates, k), strategy, None


async def select_tools(
    query: str,
    tools: Sequence[ToolDef],
    *,
    pinned: frozenset[str],
    threshold: int,
    max_tools: int,
    strategy: SelectionStrategy,
    selector: LlmSelector | None = None,
) -> SelectionResult | None:
    """None at or below the threshold (every tool stays); else what to keep and defer."""
    if not needs_selection(len(tools), threshold):
        return None
    started = time.perf_counter()
    candidates = [t for t in tools if t.name not in pinned]
    chosen, used, fallback = await _choose(query, candidates, max_tools, strategy, selector)
    kept = set(chosen)
    return SelectionResult(
        strategy=used,
        total=len(tools),
        threshold=threshold,
        max_tools=max_tools,
        pinned=tuple(t.name for t in tools if t.name in pinned),
        selected=tuple(chosen),
        deferred=tuple(t.name for t in candidates if t.name not in kept),
        elapsed_ms=(time.perf_counter() - started) * 1000.0,
        fallback=fallback,
    )
