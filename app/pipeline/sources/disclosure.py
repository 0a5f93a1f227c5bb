"""Disclosure at scale: capped, ranked source lists, `search` over a kind, bounded name enums.

When a kind has more than 12 sources (connectors, databases, MCP servers) or 20 skills, its
stub lists only the ones best ranked for the user's message, then `… and N more: use
subcommand search`. Every meta-tool searches its kind (sources and their actions, tables or
tools; 10 best, one line each). Name enums are used only while they hold at most 50 names;
beyond that the handler validates the name (with a did-you-mean).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from app.config import SelectionStrategy
from app.kit.lru import Lru
from app.pipeline.hybrid import HybridRanker
from app.pipeline.ranker import LexicalRanker
from app.pipeline.selection import rank_scored, ranker_class
from app.pipeline.tool_fields import schema_texts
from app.retrieval.text import tokenize
from app.tools.base import SearchHints, ToolDef
from app.tools.render import one_line
from app.tools.suggest import format_choices

SOURCES_CAP = 12
"""More sources than this in one kind: the stub lists only the best-ranked ones."""
SKILLS_CAP = 20
SOURCES_LISTED = 4
"""Sources listed in a capped stub."""
ITEMS_LISTED = 5
"""Action/table/tool names per source in a stub: those the user's message matches first."""
SKILLS_LISTED = 10
ENUM_MAX = 50
SEARCH_RESULTS = 10
SEARCH_DESCRIPTION_CHARS = 100
RESOURCE_DESCRIPTION_CHARS = 80
SEARCH_STRATEGY = SelectionStrategy.HYBRID
"""`search` ranks with the default selection strategy's ranker, so it finds what runtime
selection and `request_tools` find."""


def _resource_line(name: str, description: str) -> str:
    """`- name: description. ` (description cut to 80 chars) or `- name: `."""
    text = one_line(description, RESOURCE_DESCRIPTION_CHARS).rstrip(". ")
    return f"- {name}: {text}. " if text else f"- {name}: "


def source_stub(name: str, description: str, noun: str, names: Sequence[str], listed: int) -> str:
    """`- name: description. Noun (N): a, b, … and M more` (at most `listed` names)."""
    line = _resource_line(name, description)
    return f"{line}{noun} ({len(names)}): {format_choices(names, listed=listed)}"


class Entry(NamedTuple):
    """One searchable thing: a source (`jira`) or one of its items (`jira/create_issue`).

    A named tuple: indexes are cached by a tuple of entries, and tuples hash in C. An item
    may carry what its legacy tool would give the ranker (search hints, parameter names and
    descriptions from `parameter_texts`), so `search` ranks it as selection ranks that tool.
    """

    name: str
    description: str = ""
    hints: SearchHints | None = None
    params: tuple[tuple[str, str], ...] = ()


def parameter_texts(schema: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(name, description) per parameter of a schema, nested ones too (`Entry.params`)."""
    return tuple(schema_texts(schema))


def entry_tool(entry: Entry) -> ToolDef:
    """The tool the ranker sees for an entry (the parameters rebuilt from `params`)."""
    properties = {name: {"description": text} for name, text in entry.params}
    return ToolDef(
        name=entry.name,
        description=entry.description,
        parameters={"type": "object", "properties": properties},
        hints=entry.hints,
    )


class EntryIndex:
    """The shared ranking (`selection.rank_scored`, default strategy) over entries."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = list(entries)
        self._tools = [entry_tool(e) for e in self.entries]
        self._position = {e.name: i for i, e in enumerate(self.entries)}

    @property
    def tools(self) -> list[ToolDef]:
        """The entries as the ranker sees them (`entry_tool`)."""
        return self._tools

    def _ranker(self) -> LexicalRanker | HybridRanker:
        return ranker_class(SEARCH_STRATEGY).cached(self._tools)

    def ranked(self, query: str, k: int | None = None) -> list[int]:
        """Entry positions best first for `query`; no query keeps catalog order."""
        if not query.strip() or not self.entries:
            return list(range(len(self.entries) if k is None else min(k, len(self.entries))))
        return [self._position[s.name] for s in self._ranker().rank(query, k)]

    def matches(
        self, query: str, k: int = SEARCH_RESULTS, *, inline_max: int | None = None
    ) -> list[Entry]:
        """The k best entries the ranker finds relevant (empty when nothing matches). Above
        `inline_max` entries a ranker not built yet is built in the background and the quick
        word match answers meanwhile (`rank_scored`): built here, a first search over a
        couple of thousand actions would stop every run of the process for seconds."""
        found = rank_scored(query, self._tools, k, SEARCH_STRATEGY, inline_max=inline_max)
        return [self.entries[self._position[s.name]] for s in found]


_INDEXES: Lru[tuple[Entry, ...], EntryIndex] = Lru(32)


def index_for(entries: Sequence[Entry]) -> EntryIndex:
    """The shared index for these entries (a small LRU keyed by their content)."""
    key = tuple(entries)
    return _INDEXES.get_or_build(key, lambda: EntryIndex(key))


def ranked(query: str, entries: Sequence[Entry], k: int | None = None) -> list[int]:
    """Entry positions best first for `query`; no evidence keeps catalog order."""
    if not entries:
        return []
    return index_for(entries).ranked(query, k)


def search_text(
    query: str, index: EntryIndex, *, noun: str, hint: str, inline_max: int | None = None
) -> str:
    """`Best 10 of 2000 … for 'q':` then `- name: description` lines (what search returns)."""
    found = index.matches(query, inline_max=inline_max)
    if not found:
        return f"Nothing matches {query!r} among {len(index.entries)} {noun}. Try other words."
    head = f"Best {len(found)} of {len(index.entries)} {noun} for {query!r}:"
    lines = []
    for entry in found:
        text = one_line(entry.description, SEARCH_DESCRIPTION_CHARS)
        lines.append(f"- {entry.name}: {text}" if text else f"- {entry.name}")
    return "\n".join([head, *lines, hint])


def more_line(rest: int) -> str:
    return f"… and {rest} more: use subcommand search"


def name_schema(
    names: Sequence[str], *, noun: str, finder: str = "subcommand search"
) -> dict[str, Any]:
    """A string with an enum of the names while there are at most 50, else a plain string."""
    if len(names) <= ENUM_MAX:
        return {"type": "string", "enum": list(names)}
    return {
        "type": "string",
        "description": f"One of {len(names)} {noun} names; {finder} finds them.",
    }


def ranked_names(names: Sequence[str], first: Sequence[str]) -> list[str]:
    """`first` (those of `names` the request matched), then the others in catalog order."""
    known = set(names)
    head = [n for n in dict.fromkeys(first) if n in known]
    chosen = set(head)
    return head + [n for n in names if n not in chosen]


def capped_sources(query: str, sources: Sequence[Entry]) -> tuple[list[int], int]:
    """(positions of the sources to list, how many are left out) for a kind's stub."""
    if len(sources) <= SOURCES_CAP:
        return list(range(len(sources))), 0
    listed = ranked(query, sources, SOURCES_LISTED)
    return listed, len(sources) - len(listed)


@dataclass(frozen=True, slots=True)
class Source:
    """A source as its kind's stub and search see it (build with `source`)."""

    name: str
    description: str
    item_names: Sequence[str]
    entry: Entry
    """What ranks the source: its name, description and item names."""
    item_terms: tuple[tuple[frozenset[str], frozenset[str]], ...]
    """Per item: (terms of its name, terms of its description)."""

    def matched(self, terms: frozenset[str]) -> list[str]:
        """Item names sharing terms with the message: name terms count double, best first."""
        scored = [
            (2 * len(name & terms) + len(text & terms), i)
            for i, (name, text) in enumerate(self.item_terms)
        ]
        return [self.item_names[i] for score, i in sorted(scored, key=_by_score) if score > 0]


def _by_score(pair: tuple[int, int]) -> tuple[int, int]:
    return -pair[0], pair[1]


def source(name: str, description: str, items: Sequence[tuple[str, str]]) -> Source:
    """A `Source` from its (item name, item description) pairs."""
    names = [n for n, _ in items]
    words = f"{description} {' '.join(names)}".strip()
    terms = tuple((frozenset(tokenize(n)), frozenset(tokenize(d))) for n, d in items)
    return Source(name, description, names, Entry(name, words), terms)


@lru_cache(maxsize=64)
def _message_terms(query: str) -> frozenset[str]:
    return frozenset(tokenize(query))


def kind_catalog(query: str, sources: Sequence[Source], *, noun: str) -> str:
    """A kind's stub lines, one per source with its item count and a few item names.

    Each source lists at most 5 item names, those sharing terms with the user's message first
    (a term overlap: the full ranker per source would cost more than the rest of assembly),
    then catalog order. Above 12 sources only the 4 best ranked for the message are listed,
    then `… and N more: use subcommand search`.
    """
    positions, rest = capped_sources(query, [s.entry for s in sources])
    terms = _message_terms(query)
    lines = []
    for i in positions:
        src = sources[i]
        names = ranked_names(src.item_names, src.matched(terms)) if terms else src.item_names
        lines.append(source_stub(src.name, src.description, noun, names, ITEMS_LISTED))
    if rest:
        lines.append(more_line(rest))
    return "\n".join(lines)


def kind_entries(sources: Sequence[Source], items: Sequence[Entry]) -> list[Entry]:
    """What `search` ranks: every source, then every item."""
    return [*(Entry(s.name, s.description) for s in sources), *items]
