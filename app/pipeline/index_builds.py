"""Rankers for large tool sets are built off the event loop, once, never on a request.

Building a ranker for a couple of thousand tools (BM25F postings, source routing, embeddings)
takes seconds. Built on the first request that needs it, those seconds come before that chat's
first byte, and every other request of the process waits as long (one event loop). Instead:
- `IndexWarmer` (`warm.py`) builds the rankers of recently changed agents when sources
  change and at start-up, through `start` here;
- a request for a tool set above `inline_max` tools whose ranker is not built yet (an agent
  created a moment ago, a process just restarted) starts its build here, or joins the one
  under way, and is ranked meanwhile by `quick_rank`: a word match over the tools' names,
  routes and descriptions that needs no index (its selection says so in `fallback`);
- smaller tool sets are built inline as before (milliseconds).

Builds run one at a time in a worker thread of their own and land in the ranker classes'
caches (`CachedRanker.cached`), where the next request finds them.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from app.pipeline.ranker import CachedRanker, ScoredTool
from app.pipeline.tool_fields import route_text, tokens
from app.tools.base import ToolDef

R = TypeVar("R", bound=CachedRanker)
Key = tuple[type[CachedRanker], tuple[Any, ...]]

_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quiver-index")
_BUILDING: dict[Key, Future[Any]] = {}
_LOCK = threading.Lock()


def start(kind: type[R], tools: Sequence[ToolDef]) -> Future[R]:
    """The build of `kind`'s ranker for `tools`: the one under way, or a new one."""
    key: Key = (kind, kind.key(tools))
    with _LOCK:
        build = _BUILDING.get(key)
        if build is None:
            build = _BUILDER.submit(kind.cached, list(tools))
            _BUILDING[key] = build
            build.add_done_callback(partial(_forget, key))
    return build


def pending() -> int:
    """Builds queued or running in this process."""
    with _LOCK:
        return len(_BUILDING)


def _forget(key: Key, _build: Future[Any]) -> None:
    with _LOCK:
        _BUILDING.pop(key, None)


async def built(build: Future[R]) -> R:
    """Wait for a build (cancelling the wait cancels a build that has not begun)."""
    return await asyncio.wrap_future(build)


def ranker_now(kind: type[R], tools: Sequence[ToolDef], inline_max: int | None) -> R | None:
    """`kind`'s ranker for `tools` when it is built, or cheap to build here (at most
    `inline_max` tools; None: any number); else None, with its build started."""
    if inline_max is None or len(tools) <= inline_max or kind.is_cached(tools):
        return kind.cached(tools)
    start(kind, tools)
    return None


_WEIGHTS = (2.0, 1.0, 1.0)
"""A request word found in a tool's name, route, description (summed, then saturated)."""
_MOST = sum(_WEIGHTS) / (sum(_WEIGHTS) + 1)


def quick_rank(query: str, tools: Sequence[ToolDef], k: int) -> list[ScoredTool]:
    """The top k tools by the request's words in their name, route and description, each word
    weighted by its rarity among `tools` (BM25's idf) and by where it is found (`_WEIGHTS`,
    saturated); relevance is the share of the best possible score. Tools matching no word are
    left out. No index: one pass over the tools' cached token sets (~15 ms for 2,000 tools
    once their texts were tokenised). On GitHub's, Stripe's, Twilio's and Slack's operations
    (`bench.selection --real`'s requests) its recall@5 is 0.32, the lexical ranker's 0.47."""
    terms = set(tokens(query))
    if not terms or k <= 0:
        return []
    found: list[tuple[set[str], set[str], set[str]]] = []
    seen = dict.fromkeys(terms, 0)
    for tool in tools:
        hints = tool.hints
        route = route_text(hints.method, hints.path) if hints is not None and hints.path else ""
        fields = (
            set(tokens(tool.name)) & terms,
            set(tokens(route)) & terms,
            set(tokens(tool.description[:400])) & terms,
        )
        found.append(fields)
        for term in fields[0] | fields[1] | fields[2]:
            seen[term] += 1
    idf = {t: math.log((len(tools) + 1) / (n + 0.5)) for t, n in seen.items()}
    best = _MOST * sum(idf.values())
    scores = []
    for fields in found:
        score = 0.0
        for term in fields[0] | fields[1] | fields[2]:
            weight = sum(w for w, field in zip(_WEIGHTS, fields, strict=True) if term in field)
            score += idf[term] * weight / (weight + 1)
        scores.append(score / best if best > 0 else 0.0)
    order = sorted((i for i, s in enumerate(scores) if s > 0.0), key=lambda i: -scores[i])
    return [ScoredTool(tools[i].name, round(min(scores[i], 1.0), 4)) for i in order[:k]]
