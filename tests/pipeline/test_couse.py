"""The co-use prior: companions of the top hit move into the last top-k slots, and only then."""

from __future__ import annotations

from app.pipeline.couse import CoUsePrior

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
