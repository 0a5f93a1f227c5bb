"""What the `connector`, `database` and `mcp` meta-tools share.

Each takes one `subcommand`, names one stored source (`connector=`, `database=`, `server=`),
lists its sources in its description (capped and ranked for the user's message) and answers
`search` over every source and item of its kind. A subclass declares its names and words and
implements `run` for the subcommands that work on one source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from app.pipeline.sources.disclosure import (
    Entry,
    EntryIndex,
    Source,
    index_for,
    kind_catalog,
    kind_entries,
    name_schema,
    search_text,
)
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

R = TypeVar("R")


class KindMetaTool(Generic[R]):
    name: ClassVar[str]
    """The tool's name, its kind and its step prefix (`connector:search`)."""
    row_field: ClassVar[str]
    """The argument naming one source (`connector`, `database`, `server`)."""
    row_label: ClassVar[str]
    """How an unknown source is named in the error (`MCP server`)."""
    intro: ClassVar[str]
    heading: ClassVar[str]
    """The title of the source list in the description (`Connectors`)."""
    catalog_noun: ClassVar[str]
    """What each listed source counts (`Actions`)."""
    search_noun: ClassVar[str]
    search_hint: ClassVar[str]
    subcommands: ClassVar[tuple[str, ...]]
    properties: ClassVar[dict[str, Any]]
    """The kind's own arguments, between the source name and `query`."""

    def __init__(self, rows: Sequence[R], query: str = "", inline_max: int | None = None) -> None:
        self.rows = {self.name_of(r): r for r in rows}
        self._inline_max = inline_max
        """`QUIVER_TOOL_INDEX_INLINE_MAX`: a larger search index is built off the event loop."""
        self._index: EntryIndex | None = None
        self._sources = [self.source_of(r) for r in rows]
        catalog = kind_catalog(query, self._sources, noun=self.catalog_noun)
        self.tool = ToolDef(
            name=self.name,
            description=f"{self.intro}\n{self.heading}:\n{catalog}",
            parameters={
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": list(self.subcommands)},
                    self.row_field: name_schema(list(self.rows), noun=self.row_field),
                    **self.properties,
                    "query": {"type": "string"},
                },
                "required": ["subcommand"],
            },
            kind=self.name,
            target=self.name,
        )

    def name_of(self, row: R) -> str:
        raise NotImplementedError

    def source_of(self, row: R) -> Source:
        raise NotImplementedError

    def entries_of(self, row: R) -> list[Entry]:
        """The searchable items of one source (`jira/create_issue`)."""
        raise NotImplementedError

    async def run(
        self, subcommand: str, row: R, args: dict[str, Any], ctx: CallContext
    ) -> ToolResult:
        raise NotImplementedError

    def unknown_subcommand(self, subcommand: Any) -> ToolResult:
        return ToolResult.fail(
            f"Unknown subcommand {subcommand!r}. Valid: {', '.join(self.subcommands)}."
        )

    def search(self, query: Any) -> ToolResult:
        if not isinstance(query, str) or not query.strip():
            return ToolResult.fail(
                invalid_arguments(self.name, "'query' is required for subcommand 'search'")
            )
        if self._index is None:
            items = [e for row in self.rows.values() for e in self.entries_of(row)]
            self._index = index_for(kind_entries(self._sources, items))
        text = search_text(
            query,
            self._index,
            noun=self.search_noun,
            hint=self.search_hint,
            inline_max=self._inline_max,
        )
        return ToolResult.success(text, step=f"{self.name}:search")

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        subcommand = args.get("subcommand")
        if subcommand == "search":
            return self.search(args.get("query"))
        if subcommand not in self.subcommands:
            return self.unknown_subcommand(subcommand)
        name = str(args.get(self.row_field) or "")
        if not name:
            problem = f"'{self.row_field}' is required for subcommand {subcommand!r}"
            return ToolResult.fail(invalid_arguments(self.name, problem))
        row = self.rows.get(name)
        if row is None:
            return ToolResult.fail(unknown_name(self.row_label, name, list(self.rows)))
        return await self.run(str(subcommand), row, args, ctx)
