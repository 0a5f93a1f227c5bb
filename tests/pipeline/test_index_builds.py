"""Large tool sets never get their ranker built on a request (app/pipeline/index_builds.py):
while it is built in the background, selection and `request_tools` rank by a quick word match
and say so; once built, the ranker answers."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from app.config import SelectionStrategy
from app.pipeline import index_builds
from app.pipeline.assemble import assemble_toolset, selection_candidates
from app.pipeline.hybrid import HybridRanker
from app.pipeline.index_builds import quick_rank
from app.pipeline.preview import preview_toolset
from app.pipeline.selection import SelectionResult, rank_scored, select_tools
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.meta_connector import connector_search_tools
from app.tools.base import SearchHints, ToolDef
from tests.fixtures.pipeline import ctx, make_action, make_agent, make_connector, make_settings

VERBS = ("list", "get", "create", "update", "delete", "archive", "restore", "export")
NOUNS = ("invoice", "customer", "refund", "payout", "coupon", "webhook", "ticket", "report")
GROUPS = ("amber", "birch", "cedar", "maple", "willow")
"""Groups named by words, not numbers: a tool's name also holds its connector's random name,
whose pieces move every tool's vector a little; a group told apart by a digit alone ("group 3"
against "group 1") was ranked first or second by 0.016 depending on those pieces."""


def catalog(n_groups: int, tag: str = "") -> list[ToolDef]:
    """64 tools per group: every verb of every noun, in groups of their own."""
    tools = []
    for g in range(n_groups):
        for verb in VERBS:
            for noun in NOUNS:
                tools.append(
                    ToolDef(
                        name=f"api{g}{tag}__{verb}_{noun}",
                        description=f"{verb.capitalize()} a {noun} of the {GROUPS[g]} group.",
                        parameters={"type": "object", "properties": {}},
                        hints=SearchHints(source=f"api{g}", method="POST", path=f"/{noun}s"),
                    )
                )
    return tools


def tool(name: str, description: str) -> ToolDef:
    return ToolDef(name=name, description=description, parameters={"type": "object"})


def test_quick_rank_weighs_rare_words_and_names_and_leaves_out_what_matches_nothing() -> None:
    tools = [
        tool("billing__list_charges", "List the charges; a refund shows here too."),
        tool("billing__refund_charge", "Give the money of a charge back."),
        tool("ops__restart", "Restart the service."),
        *(tool(f"billing__charge_{i}", f"Charge variant {i}.") for i in range(5)),
    ]
    found = quick_rank("refund a charge", tools, 5)
    assert [s.name for s in found[:2]] == ["billing__refund_charge", "billing__list_charges"]
    assert "ops__restart" not in {s.name for s in found}
    assert all(0 < s.score <= 1 for s in found)
    assert [s.score for s in found] == sorted((s.score for s in found), reverse=True)
    assert quick_rank("book a table for two tonight", tools, 5) == []
    assert quick_rank("", tools, 5) == []
    assert quick_rank("archive coupon", catalog(2), 3)[0].name.endswith("__archive_coupon")


async def select(
    query: str, tools: list[ToolDef], strategy: SelectionStrategy = SelectionStrategy.HYBRID
) -> SelectionResult:
    """Runtime selection of 3 tools, a ranker built here only up to 100 tools."""
    result = await select_tools(
        query,
        tools,
        pinned=frozenset(),
        threshold=12,
        max_tools=3,
        strategy=strategy,
        inline_max=100,
    )
    assert result is not None
    return result


async def test_a_large_tool_set_is_ranked_by_words_while_its_ranker_is_built() -> None:
    tools = catalog(5, tag=uuid.uuid4().hex[:6])  # 320 tools, never ranked before
    query = "archive the coupon of the cedar group"
    first = await select(query, tools)
    assert first.fallback is not None
    assert "index of these 320 tools is being built" in first.fallback
    assert [s.name for s in quick_rank(query, tools, 3)] == list(first.selected)
    # one build per tool set: the request's, joined by whoever asks next
    build = index_builds.start(HybridRanker, tools)
    assert index_builds.start(HybridRanker, tools) is build or build.done()
    await index_builds.built(build)
    assert HybridRanker.is_cached(tools)
    after = await select(query, tools)
    assert after.fallback is None
    assert after.selected[0].endswith("__archive_coupon")


async def test_the_llm_strategy_falls_back_to_words_too_while_the_index_builds() -> None:
    tools = catalog(5, tag=uuid.uuid4().hex[:6])
    chosen = await select("delete the webhook", tools, SelectionStrategy.LLM)
    assert chosen.strategy is SelectionStrategy.LEXICAL
    assert chosen.fallback is not None
    assert chosen.fallback.startswith("no LLM selector configured; the index of these 320 tools")
    assert all(name.endswith("_webhook") for name in chosen.selected)


async def test_small_tool_sets_and_the_default_build_where_needed() -> None:
    small = catalog(1, tag=uuid.uuid4().hex[:6])  # 64 tools
    selection = await select("export the report", small)
    assert selection.fallback is None
    assert HybridRanker.is_cached(small)
    large = catalog(5, tag=uuid.uuid4().hex[:6])
    assert rank_scored("export the report", large, 3, SelectionStrategy.HYBRID)  # no limit
    assert HybridRanker.is_cached(large)


async def test_a_chat_and_its_preview_answer_at_once_with_the_index_unbuilt(
    backends: Backends,
) -> None:
    """With the default limit (300 tools) an agent's 320 legacy tools get the quick match:
    the selection, the request_tools listing and the preview say so, and list 20 deferred."""
    actions = [
        make_action(f"{GROUPS[int(t.name[3])]}_{t.name.split('__')[1]}", description=t.description)
        for t in catalog(5)
    ]
    connector = make_connector(f"shop{uuid.uuid4().hex[:6]}", actions)
    agent = make_agent(
        connectors=[connector],
        tool_categories=["connector"],
        config={"connector_tool_mode": "legacy", "tool_selection_max": 3},
    )
    settings = make_settings(tool_index_inline_max=300)
    toolset = await assemble_toolset(agent, settings, backends, "refund the customer")
    assert toolset.selection is not None
    assert toolset.selection.fallback is not None
    candidates = selection_candidates(toolset.full, toolset.pinned)
    assert len(candidates) > 300
    names = [t["function"]["name"] for t in toolset.openai_tools()]
    assert "request_tools" in names
    preview = await preview_toolset(agent, settings, backends, "refund the customer")
    assert preview.selection is not None
    assert len(preview.selection.deferred) == 20
    assert preview.selection.deferred_total == len(candidates) - len(preview.selection.selected)
    await index_builds.built(index_builds.start(HybridRanker, candidates))
    warm = await assemble_toolset(agent, settings, backends, "refund the customer")
    assert warm.selection is not None
    assert warm.selection.fallback is None


async def test_a_first_connector_search_over_a_large_catalog_never_builds_on_the_loop(
    backends: Backends,
) -> None:
    """Progressive mode: the `connector` meta-tool's search over 320 actions (above the
    limit) starts its index's build in the background and answers by the quick word match;
    once built, the ranker answers. Built inline, a couple of thousand actions would stop
    every run of the process for seconds."""
    actions = [
        make_action(f"{GROUPS[int(t.name[3])]}_{t.name.split('__')[1]}", description=t.description)
        for t in catalog(5, tag=uuid.uuid4().hex[:6])
    ]
    connector = make_connector(f"shop{uuid.uuid4().hex[:6]}", actions)
    agent = make_agent(connectors=[connector], tool_categories=["connector"])
    settings = make_settings(tool_index_inline_max=300)
    backends = dataclasses.replace(backends, settings=settings)
    toolset = await assemble_toolset(agent, settings, backends, "")
    assert "connector" in toolset.full_tools()
    searched = connector_search_tools([connector])
    search = {"subcommand": "search", "query": "archive the coupon of the cedar group"}
    first = await toolset.call("connector", search, ctx())
    assert first.ok, first.error
    assert first.output.startswith("Best ")
    assert not HybridRanker.is_cached(searched)  # its build is under way, not done inline
    for _ in range(600):
        if HybridRanker.is_cached(searched):
            break
        await asyncio.sleep(0.05)
    assert HybridRanker.is_cached(searched)
    after = await toolset.call("connector", search, ctx())
    assert after.ok, after.error
    assert after.output.splitlines()[1].startswith(f"- {connector.name}/cedar_archive_coupon")
