"""The co-use prior: companions of the top hit move into the last top-k slots, and only then."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from app.agents.models import Agent
from app.audit.history import ToolHistory
from app.audit.models import ToolCall
from app.audit.record import tool_call_row
from app.audit.repository import ToolCallRepository
from app.audit.sink import ToolCallSink
from app.config import SelectionStrategy
from app.pipeline.assemble import assemble_toolset
from app.pipeline.couse import CoUsePrior, CoUsePriors
from app.pipeline.selection import rank_with_prior
from app.pipeline.sources.backends import Backends
from app.tools.base import CallContext, ToolDef, ToolResult
from tests.fixtures.pipeline import make_agent, make_settings, work_connectors

RUNS = [
    {"news", "stocks"},
    {"news", "stocks"},
    {"news", "weather"},
    {"news"},
    {"maps", "weather"},
]
RANKED = ["news", "a", "b", "c", "d", "e", "stocks", "weather", "maps"]


def test_companions_need_enough_shared_runs() -> None:
    prior = CoUsePrior(RUNS, min_runs=2, min_share=0.5)
    assert len(prior) == 4
    [stocks] = prior.companions("news")
    assert (stocks.name, stocks.runs, stocks.share) == ("stocks", 2, 0.5)
    # Used with the news tool once only: not evidence.
    assert prior.companions("maps") == []
    assert prior.companions("unknown") == []


def test_fill_promotes_a_companion_into_the_last_slot() -> None:
    prior = CoUsePrior(RUNS, min_runs=2, min_share=0.5)
    filled = prior.fill(RANKED, 4, max_filled=1, depth=8)
    assert filled[:4] == ["news", "a", "b", "stocks"]
    # Nothing is lost: the displaced tool follows the top k.
    assert filled == ["news", "a", "b", "stocks", "c", "d", "e", "weather", "maps"]


def test_fill_leaves_the_ranking_alone_without_evidence() -> None:
    prior = CoUsePrior(RUNS, min_runs=2, min_share=0.5)
    # The companion ranks below `depth`: the ranker saw nothing of it in the request.
    assert prior.fill(RANKED, 4, max_filled=1, depth=6) == RANKED
    # Already in the top k: nothing to move.
    assert prior.fill(["news", "stocks", "a", "b", "c"], 3) == ["news", "stocks", "a", "b", "c"]
    # A top hit no run used.
    assert prior.fill(["a", *RANKED], 4) == ["a", *RANKED]
    assert CoUsePrior([]).fill(RANKED, 4) == RANKED
    assert prior.fill(RANKED, 1) == RANKED


# --- wired into runtime selection: the tool-call audit of the agent's past runs -------------

LEGACY = {"connector_tool_mode": "legacy", "tool_selection_threshold": 5, "tool_selection_max": 3}
QUERY = "search jira issues"
TOP, COMPANION = "jira__search_issues", "weather__forecast"


def _agent() -> Agent:
    agent = make_agent(
        connectors=work_connectors(),
        config=LEGACY,
        tool_categories=["connector"],
    )
    agent.id = uuid.uuid4()
    return agent


async def _record_runs(
    sessionmaker: async_sessionmaker[AsyncSession], agent: Agent, runs: list[list[str]]
) -> None:
    """Audit rows as a run's tool phase writes them (through the batching sink)."""
    sink = ToolCallSink(sessionmaker)
    for names in runs:
        call = CallContext(run_id=str(uuid.uuid4()), agent_id=str(agent.id))
        for name in names:
            sink.record(
                tool_call_row(
                    call_id=None,
                    name=name,
                    arguments={},
                    tool=None,
                    step=None,
                    result=ToolResult.success("ok"),
                    ctx=call,
                    latency_ms=1.0,
                )
            )
    await sink.aclose()
    assert sink.written == sum(len(r) for r in runs)


async def _selected(agent: Agent, backends: Backends) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The selected names (checked to be the ones the model is given) and the promoted ones."""
    toolset = await assemble_toolset(agent, make_settings(), backends, QUERY)
    selection = toolset.selection
    assert selection is not None
    assert COMPANION in (*selection.selected, *selection.deferred)
    assert {t.name for t in toolset.tools} == {*selection.selected, "request_tools"}
    return selection.selected, selection.promoted


async def test_past_runs_bring_the_top_hits_companion_into_the_selection(
    backends: Backends, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    agent = _agent()
    alone, _ = await _selected(agent, backends)
    assert alone[0] == TOP
    assert COMPANION not in alone  # ranked below the top 3 for this request

    await _record_runs(sessionmaker, agent, [[TOP, COMPANION], [COMPANION, TOP], [TOP]])
    priors = CoUsePriors(ToolHistory(sessionmaker))
    selected, promoted = await _selected(agent, replace(backends, couse=priors))
    assert selected == (*alone[:2], COMPANION)
    assert promoted == (COMPANION,)


async def test_without_history_the_selection_is_unchanged(
    backends: Backends, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    agent, other = _agent(), _agent()
    # Another agent's runs are not this agent's history.
    await _record_runs(sessionmaker, other, [[TOP, COMPANION], [TOP, COMPANION]])
    priors = CoUsePriors(ToolHistory(sessionmaker))
    assert await priors.prior(agent.id) is None
    assert await _selected(agent, replace(backends, couse=priors)) == await _selected(
        agent, backends
    )


async def test_a_failed_history_read_selects_as_without_history(
    backends: Backends, tmp_path: Path
) -> None:
    # A real store without the audit table: the read fails, the run goes on.
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        priors = CoUsePriors(ToolHistory(async_sessionmaker(engine)))
        agent = _agent()
        assert await priors.prior(agent.id) is None
        assert await _selected(agent, replace(backends, couse=priors)) == await _selected(
            agent, backends
        )
    finally:
        await engine.dispose()


async def test_the_prior_is_read_once_per_ttl(
    sessionmaker: async_sessionmaker[AsyncSession],
) -> None:
    agent = _agent()
    now = [0.0]
    priors = CoUsePriors(ToolHistory(sessionmaker), ttl_s=60.0, clock=lambda: now[0])
    assert await priors.prior(agent.id) is None
    await _record_runs(sessionmaker, agent, [[TOP, COMPANION], [TOP, COMPANION]])
    now[0] = 59.0
    assert await priors.prior(agent.id) is None  # cached: the new runs are not read yet
    now[0] = 60.0
    prior = await priors.prior(agent.id)
    assert prior is not None
    assert [c.name for c in prior.companions(TOP)] == [COMPANION]
    assert await priors.prior(None) is None


async def test_history_keeps_the_most_recent_runs(session: AsyncSession) -> None:
    agent_id = uuid.uuid4()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    runs = [uuid.uuid4() for _ in range(3)]
    for i, (run_id, names) in enumerate(
        zip(runs, (["a", "b"], ["c"], ["d", "d", "e"]), strict=True)
    ):
        for j, name in enumerate(names):
            session.add(
                ToolCall(
                    run_id=run_id,
                    agent_id=agent_id,
                    kind="connector",
                    name=name,
                    created_at=start + timedelta(minutes=10 * i + j),
                )
            )
    session.add(
        ToolCall(run_id=None, agent_id=agent_id, kind="builtin", name="x", created_at=start)
    )
    await session.flush()
    repo = ToolCallRepository(session)

    async def history(of: uuid.UUID, *, runs: int, calls: int) -> list[list[str]]:
        return [sorted(r) for r in await repo.run_tool_sets(of, runs=runs, calls=calls)]

    assert await history(agent_id, runs=10, calls=100) == [["d", "e"], ["c"], ["a", "b"]]
    assert await history(agent_id, runs=2, calls=100) == [["d", "e"], ["c"]]
    # The window of calls bounds the read: the oldest run counts with its calls inside it.
    assert await history(agent_id, runs=10, calls=5) == [["d", "e"], ["c"], ["b"]]
    assert await history(uuid.uuid4(), runs=10, calls=100) == []


def test_a_companion_the_ranker_placed_in_the_top_k_below_the_minimum_is_kept() -> None:
    """Past runs are evidence whether the prior moves the companion up or the ranker already
    placed it in the top k with too low a score of its own (no word of the request)."""
    tools = [
        ToolDef(name="find_gizmos", description="Search gizmos by color."),
        ToolDef(name="forecast", description="Weather forecast for a city."),
        ToolDef(name="convert_units", description="Convert between metric and imperial units."),
    ]
    prior = CoUsePrior([{"find_gizmos", "forecast"}] * 3)
    chosen, promoted, scores = rank_with_prior(
        SelectionStrategy.LEXICAL, "search gizmos by color", tools, 3, prior
    )
    assert chosen[0] == "find_gizmos"
    assert "forecast" in chosen
    assert promoted == ("forecast",)
    assert scores["forecast"] < 0.3  # below the lexical ranker's minimum score
    assert "convert_units" not in chosen
    alone, _, _ = rank_with_prior(
        SelectionStrategy.LEXICAL, "search gizmos by color", tools, 3, None
    )
    assert alone == ["find_gizmos"]
