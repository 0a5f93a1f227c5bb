"""What the ranker learns from a catalog itself: verbs' nouns, shortened names, aliases, and
how much of a request the catalog's vocabulary covers (docs/selection.md)."""

from __future__ import annotations

from app.pipeline.ranker import LexicalRanker
from app.pipeline.vocabulary import aliases, derivations, merged, shortenings, spoken_keys
from app.retrieval.text import tokenize
from app.tools.base import SearchHints, ToolDef


def _op(name: str, method: str, path: str, summary: str) -> ToolDef:
    hints = SearchHints(method=method, path=path, source="api")
    return ToolDef(name=name, description=summary, parameters={"type": "object"}, hints=hints)


def test_derivations_pair_a_verb_with_its_noun_both_ways() -> None:
    found = derivations(tokenize("review reviewers follow followers invite invitation form format"))
    assert "reviewer" in found["review"]
    assert "review" in found["reviewer"]
    assert "follower" in found["follow"]
    assert "invitat" in found["invit"]
    assert "form" not in found  # too short to pair: form and format are not one word


def test_shortenings_need_the_same_shortening_in_several_operations() -> None:
    names = [["repo", "get"], ["repo", "list"], ["repo", "delet"], ["repo", "report"]]
    summaries = [["get", "repository"], ["list", "repository"], ["delet", "repository"], []]
    found = shortenings(names, summaries)
    assert found["repo"] == ("repository",)
    assert found["repository"] == ("repo",)
    assert shortenings(names[:2], summaries[:2]) == {}  # two operations are not enough


def test_aliases_map_a_summary_word_to_the_name_word_beside_it() -> None:
    names = [["conversat", w] for w in ("creat", "list", "archiv", "kick")] + [["chat", "post"]]
    summaries = [["creat", "channel"], ["list", "channel"], ["archiv", "channel"]]
    summaries += [["remov", "user", "channel"], ["send", "messag"]]
    found = aliases(names, summaries)
    assert found["channel"] == ("conversat",)
    assert "messag" not in found  # one operation is not a pattern


def test_merged_keeps_every_tables_words_once() -> None:
    table = merged({"a": ("x",)}, {"a": ("x", "y"), "b": ("z",)})
    assert table == {"a": ("x", "y"), "b": ("z",)}


def test_foreign_share_counts_words_the_catalog_never_uses() -> None:
    tools = [
        _op("issues_create", "POST", "/repos/{owner}/{repo}/issues", "Create an issue"),
        _op("pulls_list", "GET", "/repos/{owner}/{repo}/pulls", "List pull requests"),
        _op("repos_get", "GET", "/repos/{owner}/{repo}", "Get a repository"),
    ]
    ranker = LexicalRanker(tools)
    assert ranker.foreign_share("create an issue") == 0.0
    # "bug" is a users' word for an issue: known through the vocabulary table
    assert ranker.foreign_share("report a bug") < 0.6
    assert ranker.foreign_share("how long should I roast a pumpkin?") >= 0.6
    assert ranker.foreign_share("") == 0.0


def test_words_only_long_descriptions_use_count_as_foreign() -> None:
    """On a catalog of API operations a word its descriptions use in passing ("morning") is not
    a word that says what an operation is: the request is as foreign as one the catalog never
    uses at all, while the same word in a summary makes it the catalog's own."""
    prose = "Create an issue. Teams often file these in the morning stand-up, before lunch."
    tools = [
        _op("issues_create", "POST", "/repos/{owner}/{repo}/issues", prose),
        _op("pulls_list", "GET", "/repos/{owner}/{repo}/pulls", "List pull requests"),
    ]
    ranker = LexicalRanker(tools)
    assert ranker.vocabulary is not None
    assert "morn" not in ranker.vocabulary
    assert ranker.foreign_share("lunch this morning") == 1.0
    assert ranker.foreign_share("create an issue this morning") == 1 / 3
    summary = [_op("standup_get", "GET", "/standups/{id}", "Get the morning stand-up"), *tools]
    assert LexicalRanker(summary).foreign_share("lunch this morning") == 0.5


def test_a_table_word_the_tokenizer_drops_as_filler_still_expands() -> None:
    """ "tell" is filler to the tokenizer ("tell me the balance") but a message to send in
    "tell #design the mockups are up": on a catalog of API operations it reaches the table."""
    assert spoken_keys("tell #design the mockups are up") == ["tell"]
    assert spoken_keys("tell me the balance") == []
    assert spoken_keys("run the failed jobs again") == ["again"]
    tools = [
        _op("chat_post_message", "POST", "/chat.postMessage", "Sends a message to a channel."),
        _op("conversations_create", "POST", "/conversations.create", "Creates a channel."),
        _op("conversations_list", "GET", "/conversations.list", "Lists the channels."),
    ]
    ranked = LexicalRanker(tools).rank("tell #design the mockups are up")
    assert ranked[0].name == "chat_post_message", ranked
