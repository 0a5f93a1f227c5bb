"""Build the tool rankers when sources change, not on an agent's first request.

An agent with a couple of thousand legacy tools needs its ranker (BM25F postings, source
routing, embeddings) before runtime selection can answer; built on the first chat, that is
seconds before the first byte. `IndexWarmer` builds it in the background instead: at start-up
and whenever stored configuration changes (`app/db/changes.py` moves its version: an OpenAPI
import or refresh, an agent's links, an MCP server's tool list), it assembles the most recently
changed agents' tool sets and builds the ranker their selection will ask for (and, for an agent
in progressive mode, its `connector` meta-tool's search over the actions), in the worker
thread where a request that finds none starts its build too (`index_builds.py`: one build per
tool set, whoever asks first). Rankers are cached by the tools' content
(`CachedRanker.cached`), so a request finds the one built here; the per-text work (tokens,
embeddings) is cached per process too, so after an import only the new connector's tools are
tokenised and embedded.

At start-up the first pass runs at once (no debounce) and `/readyz` waits for it (`ready`, at
most `READY_WAIT_S`): behind a load balancer the first chats after a restart find the agents'
tools and rankers in memory. Each pass loads and assembles every agent before it builds any
ranker, so a chat that comes during the builds finds its tools ready at least.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.agents.repository import AgentRepository
from app.config import SelectionStrategy, Settings, ToolMode
from app.db import changes
from app.pipeline import index_builds
from app.pipeline.assemble import assemble_toolset, selection_candidates
from app.pipeline.ranker import CachedRanker
from app.pipeline.selection import needs_selection, ranker_class
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.disclosure import SEARCH_STRATEGY
from app.pipeline.sources.meta_connector import connector_search_tools
from app.tools.base import ToolDef

logger = logging.getLogger(__name__)

AGENTS = 8
"""Agents warmed per change: the rankers' cache holds eight tool sets per ranker kind."""
DEBOUNCE_S = 0.2
"""Changes closer together than this are warmed once (an import commits several times)."""
READY_WAIT_S = 30.0
"""`/readyz` waits at most this long after start-up for the first pass's preparation."""


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
        self._first_pass_done = asyncio.Event()
        self.after_start_up: Callable[[], None] | None = None
        """Called once the start-up pass is done, before `ready` turns true (`quiver serve`
        freezes the garbage collector's view of what that pass loaded: app/main.py)."""
        self._started = time.monotonic()

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def changed() -> None:
            loop.call_soon_threadsafe(self._wake.set)

        self._started = time.monotonic()
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

    def ready(self) -> bool:
        """The start-up pass is done (or `READY_WAIT_S` went by): the recent agents' tools
        are in memory and their rankers built. `/readyz` answers 200 from then on, so behind
        a load balancer no first chat waits for, or competes with, that work."""
        if self._first_pass_done.is_set():
            return True
        return time.monotonic() - self._started > READY_WAIT_S

    async def _run(self) -> None:
        first = True
        while True:
            await self._wake.wait()
            if not first:  # start-up warms at once: /readyz waits for it
                await asyncio.sleep(DEBOUNCE_S)
            first = False
            self._wake.clear()
            self._warming = True
            try:
                # Chats may be under way (an agent was just created; a client that does not
                # wait for /readyz): the builds yield to them first, as a request's do.
                await self.warm(delay_s=index_builds.REQUEST_GRACE_S)
            except Exception:  # a failed warm-up only means the first request builds
                logger.exception("ranker warm-up failed")
            finally:
                self._warming = False
                if not self._first_pass_done.is_set():
                    self._started_up()

    def _started_up(self) -> None:
        try:
            if self.after_start_up is not None:
                self.after_start_up()
        finally:
            self._first_pass_done.set()

    async def warm(self, *, delay_s: float = 0.0) -> int:
        """Prepare the most recently changed agents' tool sets, then build their rankers
        (the first build beginning after `delay_s`); how many rankers were built.

        Preparing loads each agent (its actions through `ActionCatalog`), assembles its tools
        (legacy definitions cached per connector) and tokenises what the quick word match
        reads, for every agent before any ranker is built: a chat that comes meanwhile finds
        its tools in memory and is ranked by the quick match. `/readyz` waits for the whole
        start-up pass (`ready`)."""
        async with self._sessionmaker() as session:
            ids = await AgentRepository(session).recent_ids(AGENTS)
        due: list[tuple[uuid.UUID, type[CachedRanker], list[ToolDef]]] = []
        for agent_id in ids:
            due += [(agent_id, *found) for found in await self._prepare(agent_id)]
        built = 0
        for agent_id, kind, candidates in due:
            if kind.is_cached(candidates):
                continue
            started = time.perf_counter()
            build = index_builds.start(kind, candidates, delay_s=delay_s)
            delay_s = 0.0
            await index_builds.built(build)
            built += 1
            logger.info(
                "ranker for agent %s built: %d tools in %.0f ms",
                agent_id,
                len(candidates),
                (time.perf_counter() - started) * 1000.0,
            )
        self.warmed += built
        return built

    async def _prepare(self, agent_id: uuid.UUID) -> list[tuple[type[CachedRanker], list[ToolDef]]]:
        """The agent's tool set in memory; the rankers its requests will ask for and the
        tools each ranks: its selection's, when it needs one, and in progressive mode the
        `connector` meta-tool's search over more actions than are built inline."""
        agent = await self._agents.get(agent_id)
        if agent is None:
            return []
        toolset = await assemble_toolset(agent, self._settings, self._backends, "", select=False)
        due: list[tuple[type[CachedRanker], list[ToolDef]]] = []
        if toolset.modes.connector is ToolMode.PROGRESSIVE and "connector" in toolset.full_tools():
            searched = connector_search_tools(agent.connectors)
            if len(searched) > self._settings.tool_index_inline_max:
                due.append((ranker_class(SEARCH_STRATEGY), searched))
        config = toolset.config
        total = len(toolset.full.list_tools())
        if not needs_selection(total, config.selection_threshold):
            return due
        candidates = selection_candidates(toolset.full, toolset.pinned)
        await asyncio.to_thread(index_builds.prepare, candidates)
        if config.selection_strategy is SelectionStrategy.LLM:
            strategy = SelectionStrategy.LEXICAL  # what the llm strategy falls back to
        else:
            strategy = config.selection_strategy
        return [*due, (ranker_class(strategy), candidates)]
