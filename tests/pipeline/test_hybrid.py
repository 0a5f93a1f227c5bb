"""The hybrid ranker: lexical scores fused with static embeddings (WordLlama, distilled MiniLM)."""

from __future__ import annotations

import numpy as np
import pytest

from app.config import SelectionStrategy
from app.pipeline.hybrid import HybridRanker, _merge, clause_spans, split_clauses
from app.pipeline.ranker import LexicalRanker
from app.pipeline.selection import select_tools
from app.pipeline.static_model import MODEL_PATH, StaticModel
from app.retrieval.fusion import znorm, znorm_rows
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
    assert split_clauses("merge PR 12, after that cut release v1.4") == [
        "merge PR 12",
        "cut release v1.4",
    ]
    assert split_clauses("close issue 4 & tell #eng it is fixed") == [
        "close issue 4",
        "tell #eng it is fixed",
    ]


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
    # Found by meaning alone (no shared word): below the minimum score, so kept on its own.
    assert result.selected == ("book_flight",)
    assert len(result.deferred) == 5


def test_the_distilled_static_model_ships_in_the_repository() -> None:
    """The MiniLM-distilled table loads from the package folder (no network), small and int8."""
    assert MODEL_PATH.is_file()
    assert MODEL_PATH.stat().st_size < 12_000_000
    model = StaticModel(MODEL_PATH)
    assert (model.vocab_size, model.dim) == (30522, 256)
    assert StaticModel.shared() is StaticModel.shared()


def test_static_model_embeds_by_meaning() -> None:
    model = StaticModel.shared()
    texts = [
        "weather forecast: temperature and precipitation for a city",
        "latest share price of a stock ticker",
        "translate text between languages",
    ]
    docs = [model.ids(t) for t in texts]
    weights = model.idf_weights(docs)
    vectors = model.embed_ids([model.ids("will it rain in Oslo tomorrow"), *docs], weights)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert int(np.argmax(vectors[1:] @ vectors[0])) == 0
    other = model.embed_ids([model.ids("how much is one Apple share worth")], weights)[0]
    assert int(np.argmax(vectors[1:] @ other)) == 1


def test_static_model_weights_rare_tokens_higher() -> None:
    model = StaticModel.shared()
    docs = [model.ids(t) for t in ["get weather", "get stock", "get translation"]]
    weights = model.idf_weights(docs)
    get, weather = model.ids("get")[0], model.ids("weather")[0]
    assert weights[get] < weights[weather]
    assert model.ids("\U0001f916").size == 0  # unknown tokens carry no meaning
    empty = model.embed_ids([model.ids("")], weights)
    assert not empty.any()


def test_clause_tokens_are_sliced_from_one_encode() -> None:
    """The request is tokenised once; each clause's tokens equal those of encoding it alone."""
    model = StaticModel.shared()
    query = "Check the weather in Oslo, then book a flight and translate it to Spanish."
    clauses = split_clauses(query)
    spans = clause_spans(query, clauses)
    assert spans is not None
    sliced = model.ids_spans(query, spans)
    alone = [model.ids(t) for t in (query, *clauses)]
    assert len(sliced) == len(alone) == 4
    assert all(np.array_equal(a, b) for a, b in zip(sliced, alone, strict=True))
    assert clause_spans("one two", ["three"]) is None


def test_rows_are_z_normalised_one_by_one() -> None:
    """The request and each clause are rows of one matrix, each normalised on its own."""
    rows = np.array([[1.0, 2.0, 3.0], [10.0, 10.0, 10.0], [0.0, 4.0, 8.0]], dtype=np.float32)
    out = znorm_rows(rows)
    assert out.dtype == np.float32
    assert np.allclose(out[0], out[2])  # the same shape at another scale
    assert np.allclose(out[0].mean(), 0.0)
    assert np.allclose(out[0].std(), 1.0)
    assert not out[1].any()  # all scores equal: no evidence either way
    vector = np.array([3.0, 1.0, 2.0])
    assert np.allclose(znorm(vector), (vector - 2.0) / vector.std())
    assert not znorm(np.ones(4)).any()


def test_each_clause_brings_its_own_best_tools_near_the_top() -> None:
    """After the whole request's two best tools, each clause's best ones in turn, then the rest:
    a part the whole request's scores drown (tools 7 and 8 here) still comes in the top five."""
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    clauses = np.zeros((2, 10), dtype=np.float32)
    clauses[0, [0, 2, 3]] = [3.0, 2.0, 1.0]  # the first clause agrees with the whole request
    clauses[1, [8, 7, 9]] = [3.0, 2.0, 1.0]  # the second picks tools the whole ranks last
    merged = _merge(order, clauses, slots=4, limit=10)
    assert merged[:2] == [0, 1]
    assert merged[2:5] == [8, 2, 7]  # each clause's first, then each one's second
    assert sorted(merged) == order  # nothing lost, nothing twice
    assert _merge(order, clauses, slots=6, limit=5) == [0, 1, 8, 2, 7]
