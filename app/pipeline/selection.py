"""Runtime selection: above the threshold keep the top `max` tools for the query.

The rest stay reachable through `request_tools`, whose description lists the best-ranked
of them and which searches the others. Meta-tools are pinned (never ranked away): each is
the gateway to a whole kind of resource. With the agent's co-use prior (pipeline/couse.py),
a local ranking may move a frequent companion of its top hit into the last slot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from app.config import SelectionStrategy
from app.pipeline.couse import DEPTH, CoUsePrior
from app.pipeline.hybrid import HybridRanker
from app.pipeline.index_builds import quick_rank, ranker_now
from app.pipeline.ranker import LexicalRanker, ScoredTool
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
    """Why the llm strategy fell back to lexical, or the ranker to a quick word match while
    its index is built, if either did."""
    promoted: tuple[str, ...] = ()
    """Tools in `selected` that the co-use prior moved up from below the top `max_tools`."""
    scores: tuple[float | None, ...] = ()
    """Relevance per tool of `selected` (None where the llm chose or the prior promoted it);
    tools below the ranker's minimum score are never kept."""

    @property
    def active(self) -> tuple[str, ...]:
        return (*self.pinned, *self.selected)


def needs_selection(total: int, threshold: int) -> bool:
    return total > threshold


def ranker_class(strategy: SelectionStrategy) -> type[LexicalRanker] | type[HybridRanker]:
    """The local (no model call) ranker of a strategy: hybrid for hybrid, else lexical."""
    return HybridRanker if strategy is SelectionStrategy.HYBRID else LexicalRanker


def rank_scored(
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    strategy: SelectionStrategy,
    *,
    weak: bool = False,
    inline_max: int | None = None,
) -> list[ScoredTool]:
    """The one local ranking: runtime selection, `request_tools` and every meta-tool's
    `search` call it. The top k tools at or above the ranker's minimum score, best first
    (`weak`: see `CachedRanker.kept`). Above `inline_max` tools, while their ranker is being
    built, `quick_rank`'s (see `index_builds.py`)."""
    if not candidates or not query.strip():
        return []
    ranker = ranker_now(ranker_class(strategy), candidates, inline_max)
    if ranker is None:
        return quick_rank(query, candidates, k)
    return ranker.kept(ranker.rank(query, k), k, weak=weak, query=query)


def rank_lexical(query: str, candidates: Sequence[ToolDef], k: int) -> list[str]:
    """Top-k relevant names by the lexical ranker; ties keep catalog order."""
    return [s.name for s in rank_scored(query, candidates, k, SelectionStrategy.LEXICAL)]


def rank_hybrid(query: str, candidates: Sequence[ToolDef], k: int) -> list[str]:
    """Top-k relevant names by lexical scores fused with static embedding similarity."""
    return [s.name for s in rank_scored(query, candidates, k, SelectionStrategy.HYBRID)]


def local_rank(
    strategy: SelectionStrategy, inline_max: int | None = None
) -> Callable[[str, Sequence[ToolDef], int], list[str]]:
    """`rank(query, tools, k) -> names` for a strategy (`rank_scored`'s names)."""
    if inline_max is None:
        return rank_hybrid if strategy is SelectionStrategy.HYBRID else rank_lexical

    def rank(query: str, candidates: Sequence[ToolDef], k: int) -> list[str]:
        scored = rank_scored(query, candidates, k, strategy, inline_max=inline_max)
        return [s.name for s in scored]

    return rank


Chosen = tuple[list[str], tuple[str, ...], dict[str, float]]
"""(names kept, names the co-use prior promoted, relevance per ranked name)."""


def rank_with_prior(
    strategy: SelectionStrategy,
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    prior: CoUsePrior | None,
) -> Chosen:
    """The local ranking's top k with the prior's companion of the top hit filled in
    (`CoUsePrior.fill`), the names the prior moved into it, and the ranked tools' scores.

    Past runs are evidence of their own: a companion the prior brings in is kept even below
    the ranker's minimum score, but only when the request found a relevant top hit."""
    if prior is None:
        scored = rank_scored(query, candidates, k, strategy, weak=True)
        return [s.name for s in scored], (), {s.name: s.score for s in scored}
    if not candidates or not query.strip():
        return [], (), {}
    ranker = ranker_class(strategy).cached(candidates)
    scored = ranker.rank(query, max(k, DEPTH))
    relevant = {s.name for s in ranker.kept(scored, len(scored), weak=True, query=query)}
    if not relevant:
        return [], (), {}
    ranked = [s.name for s in scored]
    plain = [n for n in ranked[:k] if n in relevant]
    filled = prior.fill(ranked, k)[:k]
    # The top hit's companions count as evidence whether the prior moved them up or the
    # ranker already placed them in the top k below the minimum score.
    companions = {c.name for c in prior.companions(ranked[0])}
    chosen = [n for n in filled if n in relevant or n in companions]
    return chosen, tuple(n for n in chosen if n not in plain), {s.name: s.score for s in scored}


async def rank_llm(
    query: str, candidates: Sequence[ToolDef], k: int, selector: LlmSelector
) -> list[str]:
    """The selector's names, unknown or repeated ones dropped, capped at k."""
    known = {t.name for t in candidates}
    names = await selector(query, candidates, k)
    return [n for n in dict.fromkeys(names) if n in known][:k]


def _building(
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    strategy: SelectionStrategy,
    inline_max: int | None,
) -> Chosen | None:
    """`quick_rank`'s choice while the strategy's ranker for these tools is built in the
    background (`index_builds.py`); None when the ranker is there or cheap to build here."""
    if inline_max is None or not candidates or not query.strip():
        return None
    if ranker_now(ranker_class(strategy), candidates, inline_max) is not None:
        return None
    scored = quick_rank(query, candidates, k)
    return [s.name for s in scored], (), {s.name: s.score for s in scored}


def _local(
    strategy: SelectionStrategy,
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    prior: CoUsePrior | None,
    inline_max: int | None,
    reason: str | None = None,
) -> tuple[Chosen, SelectionStrategy, str | None]:
    quick = _building(query, candidates, k, strategy, inline_max)
    if quick is None:
        return rank_with_prior(strategy, query, candidates, k, prior), strategy, reason
    building = f"the index of these {len(candidates)} tools is being built: a word match chose"
    return quick, strategy, f"{reason}; {building}" if reason else building


async def _choose(
    query: str,
    candidates: Sequence[ToolDef],
    k: int,
    strategy: SelectionStrategy,
    selector: LlmSelector | None,
    prior: CoUsePrior | None,
    inline_max: int | None = None,
) -> tuple[Chosen, SelectionStrategy, str | None]:
    """The prior applies to local rankings only: the llm names `k` tools and no runners-up."""
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
                    return (chosen, (), {}), SelectionStrategy.LLM, None
                reason = "llm selection returned no known tool names"
        lexical = SelectionStrategy.LEXICAL
        return _local(lexical, query, candidates, k, prior, inline_max, reason)
    return _local(strategy, query, candidates, k, prior, inline_max)


async def select_tools(
    query: str,
    tools: Sequence[ToolDef],
    *,
    pinned: frozenset[str],
    threshold: int,
    max_tools: int,
    strategy: SelectionStrategy,
    selector: LlmSelector | None = None,
    prior: Callable[[], Awaitable[CoUsePrior | None]] | None = None,
    inline_max: int | None = None,
) -> SelectionResult | None:
    """None at or below the threshold (every tool stays); else what to keep and defer.

    `prior` gives the agent's co-use prior; it is awaited only above the threshold.
    `inline_max`: above this many candidates a ranker not built yet is not built here (see
    `index_builds.py`); None: built here whatever the size.
    """
    if not needs_selection(len(tools), threshold):
        return None
    started = time.perf_counter()
    candidates = [t for t in tools if t.name not in pinned]
    couse = await prior() if prior is not None else None
    (chosen, promoted, scores), used, fallback = await _choose(
        query, candidates, max_tools, strategy, selector, couse, inline_max
    )
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
        promoted=promoted,
        scores=tuple(None if n in promoted else scores.get(n) for n in chosen),
    )
