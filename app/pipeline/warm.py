"""Build the tool rankers when sources change, not on an agent's first request.

An agent with a couple of thousand legacy tools needs its ranker (BM25F postings, source
routing, embeddings) before runtime selection can answer; built on the first chat, that is
seconds before the first byte. `IndexWarmer` builds it in the background instead: at start-up
and whenever stored configuration changes (`app/db/changes.py` moves its version: an OpenAPI
import or refresh, an agent's links, an MCP server's tool list), it assembles the most recently
changed agents' tool sets and builds the ranker their selection will ask for, in the worker
thread where a request that finds none starts its build too (`index_builds.py`: one build per
tool set, whoever asks first). Rankers are cached by the tools' content
(`CachedRanker.cached`), so a request finds the one built here; the per-text work (tokens,
embeddings) is cached per process too, so after an import only the new connector's tools are
tokenised and embedded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.agents.repository import AgentRepository
from app.config import SelectionStrategy, Settings
from app.db import changes
from app.pipeline import index_builds
from app.pipeline.assemble import assemble_toolset, selection_candidates
from app.pipeline.selection import needs_selection, ranker_class
from app.pipeline.sources.backends import Backends

logger = logging.getLogger(__name__)

AGENTS = 8
"""Agents warmed per change: the rankers' cache holds eight tool sets per ranker kind."""
DEBOUNCE_S = 0.2
"""Changes closer together than this are warmed once (an import commits several times)."""


class IndexWarmer:
    """Background builder of the rankers of recently changed agents (see module doc)."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        agents: AgentCache,
        settings: Settings,
        backends: Backends,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._agents = agents
        self._settings = settings
        self._backends = backends
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._unlisten: Callable[[], None] | None = None
        self.warmed = 0
        """Rankers built so far (for tests and logs)."""
        self._warming = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def changed() -> None:
            loop.call_soon_threadsafe(self._wake.set)

        self._unlisten = changes.on_bump(changed)
        self._wake.set()  # warm what is stored already
        self._task = asyncio.create_task(self._run(), name="ranker-warmer")

    async def aclose(self) -> None:
        if self._unlisten is not None:
            self._unlisten()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    @property
    def busy(self) -> bool:
        """A warm-up is due or under way (`quiver_tool_index_builds` counts it)."""
        return self._wake.is_set() or self._warming

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            await asyncio.sleep(DEBOUNCE_S)
            self._wake.clear()
            self._warming = True
            try:
                await self.warm()
            except Exception:  # a failed warm-up only means the first request builds
                logger.exception("ranker warm-up failed")
            finally:
                self._warming = False

    async def warm(self) -> int:
        """Build the rankers of the most recently changed agents; how many were built."""
        async with self._sessionmaker() as session:
            ids = await AgentRepository(session).recent_ids(AGENTS)
        built = 0
        for agent_id in ids:
            agent = await self._agents.get(agent_id)
            if agent is None:
                continue
            toolset = await assemble_toolset(
                agent, self._settings, self._backends, "", select=False
            )
            config = toolset.config
            candidates = selection_candidates(toolset.full, toolset.pinned)
            if config.selection_strategy is SelectionStrategy.LLM:
                strategy = SelectionStrategy.LEXICAL  # what the llm strategy falls back to
            else:
                strategy = config.selection_strategy
            kind = ranker_class(strategy)
            total = len(toolset.full.list_tools())
            if not needs_selection(total, config.selection_threshold):
                continue
            if kind.is_cached(candidates):
                continue
            started = time.perf_counter()
            await index_builds.built(index_builds.start(kind, candidates))
            built += 1
            logger.info(
                "ranker for agent %s built: %d tools in %.0f ms",
                agent_id,
                len(candidates),
                (time.perf_counter() - started) * 1000.0,
            )
        self.warmed += built
        return built
