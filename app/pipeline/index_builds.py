"""Rankers for large tool sets are built off the event loop, once, never on a request.

Building a ranker for a couple of thousand tools (BM25F postings, source routing, embeddings)
takes seconds. Built on the first request that needs it, those seconds come before that chat's
first byte, and every other request of the process waits as long (one event loop). Instead:
- `IndexWarmer` (`warm.py`) builds the rankers of recently changed agents when sources
  change and at start-up, through `start` here;
- a request for a tool set above `inline_max` tools whose ranker is not built yet (an agent
  created a moment ago, a process just restarted) starts its build here, or joins the one
  under way, and is ranked meanwhile by `quick_rank`: a word match over the tools' names,
  routes and descriptions that needs no index (its selection says so in `fallback`); a
  meta-tool's `search` over more entries than that does the same (`EntryIndex.matches`);
- smaller tool sets are built inline as before (milliseconds).

Builds run one at a time in a worker thread of their own and land in the ranker classes'
caches (`CachedRanker.cached`), where the next request finds them.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any, TypeVar

from app.kit.lru import Lru
from app.pipeline.ranker import CachedRanker, ScoredTool
from app.pipeline.tool_fields import route_text, tokens
from app.tools.base import ToolDef

R = TypeVar("R", bound=CachedRanker)
T = TypeVar("T")
Key = tuple[type[CachedRanker], tuple[Any, ...]]

_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quiver-index")
_BUILDING: dict[Key, Future[Any]] = {}
_LOCK = threading.Lock()


_BY_TOOLS: Lru[tuple[Hashable, tuple[int, ...]], tuple[list[ToolDef], Any]] = Lru(16)


def per_tools(tag: Hashable, tools: Sequence[ToolDef], build: Callable[[], T]) -> T:
    """`build()` once per `tag` for these very tool objects in this order. One request ranks
    the same candidates twice (its selection, then `request_tools`' listing) in two lists, and
    every request of an agent finds the same definitions (`DERIVED`): a ranker's key or a quick
    ranking of ~2,000 tools is then computed once, not per call. An entry keeps the tools
    alive, so their ids are not reused while it lives."""
    ident = (tag, tuple(map(id, tools)))
    hit = _BY_TOOLS.get(ident)
    if hit is None:
        hit = _BY_TOOLS.put(ident, (list(tools), build()))
    value: T = hit[1]
    return value


REQUEST_GRACE_S = 0.5
"""A build a request starts waits this long in its thread first: the request that found the
index missing (and those arriving with it) answer before the build takes its share of the
GIL. Builds the warmer starts begin at once."""


def start(
    kind: type[R], tools: Sequence[ToolDef], *, delay_s: float = 0.0, key: Any = None
) -> Future[R]:
    """The build of `kind`'s ranker for `tools`: the one under way, or a new one that begins
    after `delay_s`. `key`: `kind.key(tools)` when the caller has it already."""
    full: Key = (kind, kind.key(tools) if key is None else key)
    with _LOCK:
        build = _BUILDING.get(full)
        if build is None:
            build = _BUILDER.submit(_build, kind, list(tools), delay_s)
            _BUILDING[full] = build
            build.add_done_callback(partial(_forget, full))
    return build


def _build(kind: type[R], tools: list[ToolDef], delay_s: float) -> R:
    if delay_s > 0:
        time.sleep(delay_s)  # sleeping holds no GIL
    return kind.cached(tools)


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
    if inline_max is None or len(tools) <= inline_max:
        return kind.cached(tools)
    key = per_tools(kind.__name__, tools, partial(kind.key, tools))
    found = kind.lookup(key)
    if found is not None:
        return found
    start(kind, tools, delay_s=REQUEST_GRACE_S, key=key)
    return None


_WEIGHTS = (2.0, 1.0, 1.0)
"""A request word found in a tool's name, route, description (summed, then saturated)."""
_MOST = sum(_WEIGHTS) / (sum(_WEIGHTS) + 1)


@lru_cache(maxsize=1 << 14)
def _route(method: str, path: str) -> tuple[str, ...]:
    return tokens(route_text(method, path))


Fields = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
_FIELDS: dict[int, tuple[ToolDef, Fields, frozenset[str]]] = {}
"""Per tool definition (by identity; the entry keeps it alive, so its id is not reused):
what `quick_rank` reads of it. Definitions are shared across requests (`DERIVED`)."""
_FIELDS_MAX = 1 << 15


def _quick_fields(tool: ToolDef) -> tuple[Fields, frozenset[str]]:
    """What `quick_rank` reads of a tool: its name's, route's and description's tokens, and
    all of them as one set."""
    hit = _FIELDS.get(id(tool))
    if hit is not None and hit[0] is tool:
        return hit[1], hit[2]
    hints = tool.hints
    route = _route(hints.method, hints.path) if hints is not None and hints.path else ()
    fields = (tokens(tool.name), route, tokens(tool.description[:400]))
    every = frozenset().union(*fields)
    if len(_FIELDS) >= _FIELDS_MAX:
        _FIELDS.clear()
    _FIELDS[id(tool)] = (tool, fields, every)
    return fields, every


def prepare(tools: Sequence[ToolDef]) -> None:
    """Tokenise what `quick_rank` reads of these tools ahead of their first request (an
    import's new definitions): the first ranking of a cold catalog is then ~15 ms, not ~110."""
    for tool in tools:
        _quick_fields(tool)


def quick_rank(query: str, tools: Sequence[ToolDef], k: int) -> list[ScoredTool]:
    """The top k tools by the request's words in their name, route and description, each word
    weighted by its rarity among `tools` (BM25's idf) and by where it is found (`_WEIGHTS`,
    saturated); relevance is the share of the best possible score. Tools matching no word are
    left out. No index: one pass over the tools' cached token sets (~15 ms for 2,000 tools
    once their texts were tokenised). On GitHub's, Stripe's, Twilio's and Slack's operations
    (`bench.selection --real`'s requests) its recall@5 is 0.32, the lexical ranker's 0.47."""
    terms = frozenset(tokens(query))
    if not terms or k <= 0:
        return []
    ranked = per_tools(("quick", terms), tools, partial(_quick_scores, terms, tools))
    return [ScoredTool(tools[i].name, round(min(score, 1.0), 4)) for score, i in ranked[:k]]


def _quick_scores(terms: frozenset[str], tools: Sequence[ToolDef]) -> list[tuple[float, int]]:
    """(relevance, index) of every tool matching a term, best first (see `quick_rank`)."""
    found: list[tuple[int, tuple[frozenset[str], frozenset[str], frozenset[str]]]] = []
    seen = dict.fromkeys(terms, 0)
    for i, tool in enumerate(tools):
        (name, route, description), every = _quick_fields(tool)
        if terms.isdisjoint(every):
            continue  # most tools: no set is built for them
        fields = (
            terms.intersection(name),
            terms.intersection(route),
            terms.intersection(description),
        )
        found.append((i, fields))
        for term in fields[0] | fields[1] | fields[2]:
            seen[term] += 1
    idf = {t: math.log((len(tools) + 1) / (n + 0.5)) for t, n in seen.items()}
    best = _MOST * sum(idf.values())
    scores: list[tuple[float, int]] = []
    for i, fields in found:
        score = 0.0
        for term in fields[0] | fields[1] | fields[2]:
            weight = sum(w for w, field in zip(_WEIGHTS, fields, strict=True) if term in field)
            score += idf[term] * weight / (weight + 1)
        if score > 0.0 and best > 0:
            scores.append((score / best, i))
    scores.sort(key=lambda s: (-s[0], s[1]))  # best first, ties in catalog order
    return scores
