"""A co-use prior for tool selection: tools that past runs used together with the top hit.

A request such as "the latest news about Tesla and what it did to the stock" rarely names both
tools it needs; the ranker finds the news tool and may miss the finance one. Runs that used
tools together are evidence: if most runs that used the top-ranked tool also used another one,
that companion is promoted into the last of the `k` slots, but only when the ranker itself
already placed it among the first `depth` tools (so a companion unrelated to the request never
displaces a relevant tool on the ranker's word alone).

The prior is fitted from tool sets, one per past run: for an agent, the tool names each of its
most recent runs called, read from the tool-call audit (`CoUsePriors`, cached per agent).
bench/selection.py (`--couse`) fits it on one half of MetaTool-multi and reports on the other,
and on single-tool requests to show it does not lower their recall.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from app.audit.history import ToolHistoryBackend

logger = logging.getLogger(__name__)

MIN_RUNS = 2
"""Runs that must have used the pair together before it counts as evidence."""
MIN_SHARE = 0.1
"""Share of the top hit's runs that also used the companion."""
MAX_FILLED = 1
"""Slots of the top `k` the prior may take over (the last ones)."""
DEPTH = 10
"""A companion must already rank within this many tools to be promoted.

The four constants were chosen on the `tune` half of MetaTool-multi alone (fitted on one half
of it, scored on the other); bench/selection.py reports the `test` half."""

HISTORY_RUNS = 500
"""An agent's prior is fitted on at most this many of its most recent runs ..."""
HISTORY_CALLS = 5000
"""... found among its most recent tool calls (bounds the read however old the agent is)."""
TTL_S = 60.0
"""How long an agent's prior is reused before the audit is read again."""


@dataclass(frozen=True, slots=True)
class Companion:
    name: str
    runs: int
    """Runs that used both tools."""
    share: float
    """`runs` over the runs that used the anchor tool."""


class CoUsePrior:
    """Pairwise co-use counts over past runs' tool sets."""

    def __init__(
        self,
        runs: Iterable[Collection[str]],
        *,
        min_runs: int = MIN_RUNS,
        min_share: float = MIN_SHARE,
    ) -> None:
        self.min_runs = min_runs
        self.min_share = min_share
        self._uses: Counter[str] = Counter()
        self._pairs: dict[str, Counter[str]] = {}
        for run in runs:
            tools = set(run)
            self._uses.update(tools)
            if len(tools) < 2:
                continue
            for a in tools:
                self._pairs.setdefault(a, Counter()).update(b for b in tools if b != a)

    def __len__(self) -> int:
        """Distinct tools seen in any run."""
        return len(self._uses)

    def companions(self, name: str) -> list[Companion]:
        """Tools used with `name` often enough to count, most shared first (ties by name)."""
        uses = self._uses.get(name, 0)
        pairs = self._pairs.get(name)
        if not uses or not pairs:
            return []
        found = [
            Companion(other, runs, runs / uses)
            for other, runs in pairs.items()
            if runs >= self.min_runs and runs / uses >= self.min_share
        ]
        return sorted(found, key=lambda c: (-c.share, -c.runs, c.name))

    def fill(
        self,
        ranked: Sequence[str],
        k: int,
        *,
        max_filled: int = MAX_FILLED,
        depth: int = DEPTH,
    ) -> list[str]:
        """The ranked names with the top hit's companions moved into the last top-`k` slots.

        Only companions the ranker placed below `k` but within `depth` move; the tools they
        displace keep their order right after the top `k`. The order is otherwise unchanged.
        """
        if k < 2 or len(ranked) <= k:
            return list(ranked)
        window = set(ranked[k:depth])
        promoted = [c.name for c in self.companions(ranked[0]) if c.name in window][
            : min(max_filled, k - 1)
        ]
        if not promoted:
            return list(ranked)
        moved = set(promoted)
        rest = [n for n in ranked if n not in moved]
        keep = k - len(promoted)
        return [*rest[:keep], *promoted, *rest[keep:]]


LOAD_TIMEOUT_S = 1.0
"""Longest a run waits for its agent's history (measured: 13 ms p50 for 500 runs); a slower
database costs that run its prior, never its selection."""


class CoUsePriors:
    """Each agent's co-use prior, fitted from its runs' tool-call audit rows and cached in process.

    The audit is read at most once per agent per `ttl_s` (concurrent runs of one agent wait for
    the same read). A failed read is logged and cached as "no prior" for `ttl_s` too: selection
    then ranks exactly as without history, and the run goes on.
    """

    def __init__(
        self,
        history: ToolHistoryBackend,
        *,
        ttl_s: float = TTL_S,
        runs: int = HISTORY_RUNS,
        calls: int = HISTORY_CALLS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._history = history
        self._ttl_s = ttl_s
        self._runs = runs
        self._calls = calls
        self._clock = clock
        self._cached: dict[uuid.UUID, tuple[float, CoUsePrior | None]] = {}
        self._locks: dict[uuid.UUID, asyncio.Lock] = {}

    async def prior(self, agent_id: uuid.UUID | None) -> CoUsePrior | None:
        """The agent's prior; None without an id, without history, or when reading failed."""
        if agent_id is None:
            return None
        hit = self._fresh(agent_id)
        if hit is not None:
            return hit[1]
        lock = self._locks.setdefault(agent_id, asyncio.Lock())
        async with lock:
            hit = self._fresh(agent_id)
            if hit is not None:
                return hit[1]
            prior = await self._load(agent_id)
            self._forget_expired()
            self._cached[agent_id] = (self._clock() + self._ttl_s, prior)
            return prior

    def _fresh(self, agent_id: uuid.UUID) -> tuple[float, CoUsePrior | None] | None:
        hit = self._cached.get(agent_id)
        return hit if hit is not None and hit[0] > self._clock() else None

    def _forget_expired(self) -> None:
        now = self._clock()
        for agent_id in [a for a, (expires, _) in self._cached.items() if expires <= now]:
            del self._cached[agent_id]
            lock = self._locks.get(agent_id)
            if lock is not None and not lock.locked():
                del self._locks[agent_id]

    async def _load(self, agent_id: uuid.UUID) -> CoUsePrior | None:
        try:
            async with asyncio.timeout(LOAD_TIMEOUT_S):
                runs = await self._history.run_tool_sets(
                    agent_id, runs=self._runs, calls=self._calls
                )
        except Exception as exc:  # selection goes on without a prior (a timeout included)
            logger.warning(
                "co-use history of agent %s unavailable: %s", agent_id, type(exc).__name__
            )
            return None
        prior = CoUsePrior(runs)
        return prior if len(prior) else None
