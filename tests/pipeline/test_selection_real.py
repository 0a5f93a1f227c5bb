"""Selection on real catalogs: trimmed GitHub and Stripe descriptions plus Twilio's, imported.

What issue #27 asks of the ranker, on real operations: the method and path count as words,
users' words reach the APIs' words, unrelated requests keep (almost) nothing, the preview shows
a score per kept tool, and selection, `request_tools` and `connector search` rank alike.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import uuid
from functools import cache
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.agents.cache import AgentCache
from app.agents.models import Agent
from app.config import SelectionStrategy
from app.connectors.models import Connector, ConnectorAction
from app.connectors.openapi import parse_openapi
from app.pipeline.assemble import assemble_toolset, selection_candidates
from app.pipeline.hybrid import HybridRanker
from app.pipeline.preview import preview_toolset
from app.pipeline.selection import rank_scored, select_tools
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.legacy import connector_tool_def
from app.pipeline.sources.meta_connector import connector_search_tools
from app.pipeline.warm import IndexWarmer
from app.tools.base import ToolDef
from app.tools.meta.request_tools import RequestToolsToolset
from tests.fixtures.pipeline import ctx, make_agent, make_settings

DATA = Path(__file__).resolve().parents[1] / "data" / "openapi"
FILES = {
    "github": "github_trimmed.json.gz",
    "stripe": "stripe_trimmed.json.gz",
    "twilio": "twilio_api_v2010.json.gz",
}
LEGACY = {"connector_tool_mode": "legacy", "tool_selection_threshold": 12, "tool_selection_max": 3}
UNSERVED = "book me a table for two at an Italian place tonight"


@cache
def _drafts() -> dict[str, tuple[str, list[dict[str, object]]]]:
    out: dict[str, tuple[str, list[dict[str, object]]]] = {}
    for api, name in FILES.items():
        doc = json.loads(gzip.decompress((DATA / name).read_bytes()))
        draft = parse_openapi(doc, name=api, base_url="https://api.example.invalid")
        out[api] = (draft.description, [a.model_dump() for a in draft.actions])
    return out


def _connectors() -> list[Connector]:
    connectors = []
    for api, (description, actions) in _drafts().items():
        rows = [
            ConnectorAction(
                name=a["name"],
                description=a["description"],
                method=a["method"],
                path=a["path"],
                parameters=a["parameters"],
            )
            for a in actions
        ]
        connectors.append(
            Connector(
                name=api,
                description=description,
                base_url="https://api.example.invalid",
                auth_type="none",
                auth_config={},
                actions=rows,
            )
        )
    return connectors


def _tools() -> list[ToolDef]:
    return [connector_tool_def(c, a) for c in _connectors() for a in c.actions]


def _agent(config: dict[str, object] | None = None) -> Agent:
    return make_agent(
        connectors=_connectors(), config={**LEGACY, **(config or {})}, tool_categories=["connector"]
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # the method and path say it: POST /v1/customers is "create customer"
        ("create a customer for jane@acme.com", "stripe__post_customers"),
        ("compare main with the release branch", "github__repos_compare_commits_with_basehead"),
        # users' words, not the API's
        ("shoot a text to +15551234567: the report is ready", "twilio__create_message"),
        ("who am I logged in as?", "github__users_get_authenticated"),
        ("file a bug about the login page crashing", "github__issues_create"),
        ("what's our stripe balance", "stripe__get_balance"),
    ],
)
def test_real_requests_find_their_operation(query: str, expected: str) -> None:
    top = [s.name for s in rank_scored(query, _tools(), 3, SelectionStrategy.HYBRID)]
    assert expected in top, top


def test_both_parts_of_a_two_part_request_come_near_the_top() -> None:
    query = "refund the charge and star the fastapi repo"
    top = [s.name for s in rank_scored(query, _tools(), 3, SelectionStrategy.HYBRID)]
    assert {"stripe__post_refunds", "stripe__get_refunds"} & set(top), top
    assert "github__activity_star_repo_for_authenticated_user" in top, top


def test_a_part_the_whole_request_drowns_still_comes_near_the_top() -> None:
    """GitHub's words outweigh Twilio's in the whole request; the second clause's own best
    tools are merged in (`hybrid._merge`), so sending the SMS is in the top five too."""
    query = "list the open pull requests and send an sms to the on-call"
    top = [s.name for s in HybridRanker.cached(_tools()).rank(query, k=5)]
    assert "github__pulls_list" in top, top
    assert "twilio__create_message" in top, top


@pytest.mark.parametrize("strategy", [SelectionStrategy.HYBRID, SelectionStrategy.LEXICAL])
async def test_an_unserved_request_keeps_fewer_than_three_tools(
    strategy: SelectionStrategy,
) -> None:
    tools = _tools()
    result = await select_tools(
        UNSERVED, tools, pinned=frozenset(), threshold=12, max_tools=6, strategy=strategy
    )
    assert result is not None
    assert len(result.selected) < 3, result.selected
    served = await select_tools(
        "open a pull request",
        tools,
        pinned=frozenset(),
        threshold=12,
        max_tools=6,
        strategy=strategy,
    )
    assert served is not None
    assert len(served.selected) >= 3


async def test_request_tools_and_connector_search_say_nothing_matches(backends: Backends) -> None:
    query = "what's the capital of Australia in Roman numerals"
    toolset = await assemble_toolset(_agent(), make_settings(), backends, "open a pull request")
    assert toolset.active_set is not None
    request_tools = RequestToolsToolset(toolset.active_set, rank=None)
    ranked = RequestToolsToolset(
        toolset.active_set,
        rank=lambda q, tools, k: [
            s.name for s in rank_scored(q, tools, k, SelectionStrategy.HYBRID)
        ],
    )
    assert ranked.search(query).startswith(f"Nothing matches {query!r}")
    assert request_tools.search(query).startswith("Best 10 of")  # no ranker: catalog order

    progressive = make_agent(connectors=_connectors(), tool_categories=["connector"])
    meta = await assemble_toolset(progressive, make_settings(), backends, "")
    result = await meta.call("connector", {"subcommand": "search", "query": query}, ctx())
    assert result.ok, result.error
    assert result.output.startswith(f"Nothing matches {query!r}")


async def test_preview_scores_every_kept_tool_and_lists_deferred_like_request_tools(
    backends: Backends,
) -> None:
    preview = await preview_toolset(_agent(), make_settings(), backends, "merge pull request 42")
    selection = preview.selection
    assert selection is not None
    assert selection.selected[0] == "github__pulls_merge"
    assert len(selection.scores) == len(selection.selected)
    assert all(s is not None and s >= HybridRanker.min_score for s in selection.scores)
    assert selection.scores == sorted(selection.scores, reverse=True)  # type: ignore[type-var]
    total = sum(len(c.actions) for c in _connectors())
    assert selection.deferred_total == total - len(selection.selected)
    assert len(selection.deferred) == 20
    request_tools = next(t for t in preview.tools if t["function"]["name"] == "request_tools")
    listed = [
        line[2:].split(":", 1)[0]
        for line in request_tools["function"]["description"].splitlines()
        if line.startswith("- ")
    ]
    assert selection.deferred == listed


@pytest.mark.parametrize(
    "query",
    ["merge the pull request", "refund a charge", "send an sms", "list workflow runs"],
)
async def test_selection_request_tools_and_search_rank_alike(
    backends: Backends, query: str
) -> None:
    settings = make_settings()
    legacy = await assemble_toolset(_agent(), settings, backends, query)
    assert legacy.selection is not None
    assert legacy.active_set is not None
    ranking = [s.name for s in rank_scored(query, _tools(), 13, SelectionStrategy.HYBRID)]
    # selection keeps the ranking's head ...
    assert list(legacy.selection.selected) == ranking[:3]
    # ... request_tools finds what follows it, in the same order
    found = await legacy.call("request_tools", {"query": query}, ctx())
    assert found.ok
    names = [line[2:].split(":", 1)[0] for line in found.output.splitlines() if line[:2] == "- "]
    assert names == ranking[3 : 3 + len(names)]
    # ... and the connector meta-tool's search lists the same operations first
    progressive = make_agent(connectors=_connectors(), tool_categories=["connector"])
    meta = await assemble_toolset(progressive, settings, backends, query)
    result = await meta.call("connector", {"subcommand": "search", "query": query}, ctx())
    items = [
        line[2:].split(":", 1)[0].replace("/", "__")
        for line in result.output.splitlines()
        if line.startswith("- ") and "/" in line.split(":", 1)[0]
    ]
    assert items[:3] == ranking[:3]


async def _stored_twilio_agent(
    sessionmaker: async_sessionmaker[AsyncSession], config: dict[str, object]
) -> Agent:
    """An agent wired to Twilio's 195 operations, stored."""
    async with sessionmaker() as session:
        agent = Agent(
            id=uuid.uuid4(),
            name=f"real-{uuid.uuid4().hex[:8]}",
            description="",
            instructions="",
            model_config_json=config,
            tool_categories=["connector"],
        )
        agent.connectors = [_connectors()[2]]
        agent.connectors[0].name = f"twilio-{uuid.uuid4().hex[:6]}"
        session.add(agent)
        await session.commit()
    return agent


async def test_the_warmer_builds_the_ranker_when_sources_change(
    backends: Backends, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    agent = await _stored_twilio_agent(sessionmaker, LEGACY)
    HybridRanker.cache_clear()
    warmer = IndexWarmer(sessionmaker, AgentCache(sessionmaker), make_settings(), backends)
    assert await warmer.warm() == 1
    loaded = await AgentCache(sessionmaker).get(agent.id)
    assert loaded is not None
    toolset = await assemble_toolset(loaded, make_settings(), backends, "", select=False)
    assert HybridRanker.is_cached(selection_candidates(toolset.full, toolset.pinned))
    assert await warmer.warm() == 0  # nothing changed: nothing to build


async def test_the_warmer_builds_a_progressive_agents_connector_search_ahead(
    backends: Backends, sessionmaker: async_sessionmaker[AsyncSession]
) -> None:
    """Progressive mode: the `connector` meta-tool's search over Twilio's 195 operations
    (above a limit of 100) is built by the warmer, so the first search finds it built."""
    agent = await _stored_twilio_agent(sessionmaker, {"connector_tool_mode": "progressive"})
    settings = make_settings(tool_index_inline_max=100)
    backends = dataclasses.replace(backends, settings=settings)
    loaded = await AgentCache(sessionmaker).get(agent.id)
    assert loaded is not None
    searched = connector_search_tools(loaded.connectors)
    assert len(searched) > 100
    assert not HybridRanker.is_cached(searched)
    warmer = IndexWarmer(sessionmaker, AgentCache(sessionmaker), settings, backends)
    assert await warmer.warm() == 1
    assert HybridRanker.is_cached(searched)
    toolset = await assemble_toolset(loaded, settings, backends, "")
    query = {"subcommand": "search", "query": "send a text message to a phone"}
    result = await toolset.call("connector", query, ctx())
    assert result.ok, result.error
    assert "create_message" in result.output.splitlines()[1]


def test_a_request_mostly_foreign_to_the_catalog_keeps_at_most_two() -> None:
    """Whatever its best score, a request whose words the catalogs mostly never use keeps
    at most two tools; a request in the catalogs' words keeps its full selection."""
    tools = _tools()
    ranker = HybridRanker.cached(tools)
    foreign = "how long should I roast a pumpkin for the harvest dinner?"
    assert ranker.unsure(foreign)
    assert len(rank_scored(foreign, tools, 6, SelectionStrategy.HYBRID)) <= 2
    assert not ranker.unsure("list the open pull requests")
    assert len(rank_scored("list the open pull requests", tools, 6, SelectionStrategy.HYBRID)) > 2
