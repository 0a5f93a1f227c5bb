"""The hybrid ranker: lexical scores fused with WordLlama static embeddings, loaded offline."""

from __future__ import annotations

import pytest

from app.config import SelectionStrategy
from app.pipeline.hybrid import HybridRanker, split_clauses
from app.pipeline.ranker import LexicalRanker
from app.pipeline.selection import select_tools
from app.tools.base import ToolDef

TOOLS = [
    ToolDef(name=name, description=description)
    for name, description in [
        ("weather_forecast", "Forecast for a city: temperature, precipitation and wind."),
        ("stock_quote", "Latest share price and market cap for a ticker symbol."),
        ("translate_text", "Translate text between languages."),
        ("book_flight", "Book airline tickets between two airports."),
        ("recipe_search", "Find cooking recipes by ingredient."),
        ("movie_showtimes", "Cinema showtimes for films near you."),
    ]
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("how much is apple trading at", "stock_quote"),
        ("I need a plane to Rome", "book_flight"),
        ("say hello in Spanish", "translate_text"),
    ],
)
def test_meaning_without_shared_words(query: str, expected: str) -> None:
    """Requests that share no word with the right tool: the embeddings find it."""
    assert LexicalRanker(TOOLS).rank(query, k=1)[0].name != expected
    assert HybridRanker(TOOLS).rank(query, k=1)[0].name == expected


def test_exact_names_still_win() -> None:
    ranked = HybridRanker(TOOLS).rank("call recipe_search for pancakes", k=2)
    assert ranked[0].name == "recipe_search"


def test_scores_keep_lexical_evidence_for_abstaining() -> None:
    ranker = HybridRanker(TOOLS)
    assert ranker.should_abstain(ranker.rank("zzzz qqqq", k=3))
    assert not ranker.should_abstain(ranker.rank("translate this text", k=3))
    assert [s.name for s in ranker.rank("", k=2)] == ["weather_forecast", "stock_quote"]
    assert len(ranker.rank("anything", k=None)) == len(TOOLS)
    assert ranker.rank("anything", k=0) == []


def test_clauses_split_on_punctuation_and_conjunctions() -> None:
    assert split_clauses("Check the weather in Oslo, then book a flight and translate it") == [
        "Check the weather in Oslo",
        "book a flight",
        "translate it",
    ]
    assert split_clauses("weather in Oslo") == []


def test_a_multi_part_request_reaches_each_part() -> None:
    ranked = [
        s.name
        for s in HybridRanker(TOOLS).rank(
            "Will it rain in Oslo tomorrow, and what is the share price of Apple?", k=2
        )
    ]
    assert set(ranked) == {"weather_forecast", "stock_quote"}


def test_index_is_cached_by_content() -> None:
    HybridRanker.cache_clear()
    ranker = HybridRanker.cached(TOOLS)
    assert HybridRanker.cached(list(TOOLS)) is ranker
    changed = [*TOOLS[:-1], ToolDef(name="movie_showtimes", description="Theatre times.")]
    assert HybridRanker.cached(changed) is not ranker


async def test_hybrid_strategy_selects_and_reports_itself() -> None:
    result = await select_tools(
        "I need a plane to Rome",
        TOOLS,
        pinned=frozenset(),
        threshold=3,
        max_tools=2,
        strategy=SelectionStrategy.HYBRID,
    )
    assert result is not None
    assert result.strategy is SelectionStrategy.HYBRID
    assert result.selected[0] == "book_flight"
    assert len(result.deferred) == 4
