"""`request_tools(query?, tool_names?)`: search and load deferred tools mid-run.

The description names how many tools are deferred and lists at most 20 of them, the best
ranked for the user's message, so its size never grows with the catalog. `query` searches
the deferred tools (10 best, nothing loaded); `tool_names` loads tools for the rest of the
run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app.tools.base import CallContext, ToolDef, ToolResult, Toolset
from app.tools.render import one_line
from app.tools.wrappers import Activation, ActiveSetToolset

NAME = "request_tools"
CATALOG_DESCRIPTION_CHARS = 80
CATALOG_LISTED = 20
SEARCH_RESULTS = 10
SEARCH_DESCRIPTION_CHARS = 160

Rank = Callable[[str, Sequence[ToolDef], int], list[str]]
"""`rank(query, tools, k) -> names`, best first: the local ranker of runtime selection."""

_INTRO = (
    "Load more tools for this task: tool_names loads them for the rest of the run;"
    " query searches the tools not loaded yet (10 best matches, nothing loaded)."
)
_ALL_LOADED = "Load more tools by name. All tools are already loaded."
_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "minLength": 1,
            "description": "What the tools should do; returns the best matches, loads nothing.",
        },
        "tool_names": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": "Exact names of tools to load.",
        },
    },
    "additionalProperties": False,
}


def catalog_line(tool: ToolDef, limit: int = CATALOG_DESCRIPTION_CHARS) -> str:
    """`- name: description` with the description cut to `limit` chars (80 by default)."""
    text = one_line(tool.description, limit)
    return f"- {tool.name}: {text}" if text else f"- {tool.name}"


def more_line(rest: int) -> str:
    return f"… and {rest} more: call request_tools with a query to search them"


def activation_text(activation: Activation) -> str:
    """`Loaded: a, b` / `Already loaded: c` / `Not found: x (did you mean 'y'?)`, one per line."""
    lines: list[str] = []
    if activation.loaded:
        lines.append("Loaded: " + ", ".join(activation.loaded))
    if activation.already:
        lines.append("Already loaded: " + ", ".join(activation.already))
    if activation.not_found:
        missing = [
            f"{name} (did you mean {close!r}?)" if close else name
            for name, close in activation.not_found
        ]
        lines.append("Not found: " + ", ".join(missing))
    return "\n".join(lines)


class RequestToolsToolset(Toolset):
    """One tool that lists (a capped, ranked part of), searches and loads what `active` lacks.

    `query` is the user's message the listing is ranked for; `rank` is the local ranker.
    Without a ranker the listing keeps catalog order (still capped).
    """

    label = NAME

    def __init__(
        self,
        active: ActiveSetToolset,
        query: str = "",
        rank: Rank | None = None,
        *,
        pool: Sequence[ToolDef] | None = None,
    ) -> None:
        """`pool`: the tools to rank (default: the whole catalog); runtime selection passes
        the ones it ranked, so both use one ranker."""
        self.active = active
        self.query = query
        self._rank = rank
        self._pool = pool
        self._cache: tuple[int, ToolDef] | None = None

    def _best_deferred(self, query: str, k: int) -> list[ToolDef]:
        """The k deferred tools best ranked for `query`, only those the ranker finds relevant
        (catalog order without a ranker or a query)."""
        deferred = self.active.deferred()
        if self._rank is None or not query.strip():
            return deferred[:k]
        by_name = {t.name: t for t in deferred}
        # Rank the whole catalog (one cached index whatever is loaded), then skip loaded ones.
        catalog = list(self._pool or self.active.inner.list_tools().values())
        loaded = len(catalog) - len(deferred)
        ranked = self._rank(query, catalog, k + loaded)
        return [by_name[n] for n in ranked if n in by_name][:k]

    def listing(self) -> list[ToolDef]:
        """What the description lists: the deferred tools relevant to the user's message, best
        first, then the others in catalog order, 20 in all (the preview lists the same)."""
        deferred = self.active.deferred()
        best = self._best_deferred(self.query, CATALOG_LISTED)
        named = {t.name for t in best}
        rest = (t for t in deferred if t.name not in named)
        return [*best, *itertools.islice(rest, CATALOG_LISTED - len(best))]

    def _tool(self) -> ToolDef:
        deferred = self.active.deferred()
        if self._cache is not None and self._cache[0] == len(deferred):
            return self._cache[1]
        if deferred:
            listed = self.listing()
            lines = [
                _INTRO,
                f"{len(deferred)} tools not loaded yet"
                + (", the best for this request:" if len(listed) < len(deferred) else ":"),
                *(catalog_line(t) for t in listed),
            ]
            if len(listed) < len(deferred):
                lines.append(more_line(len(deferred) - len(listed)))
            description = "\n".join(lines)
        else:
            description = _ALL_LOADED
        tool = ToolDef(
            name=NAME,
            description=description,
            parameters=_PARAMETERS,
            kind="meta",
            target="request_tools",
        )
        self._cache = (len(deferred), tool)
        return tool

    def list_tools(self) -> Mapping[str, ToolDef]:
        return {NAME: self._tool()}

    def search(self, query: str) -> str:
        """The 10 best deferred matches for `query`, one line each; nothing is loaded."""
        total = len(self.active.deferred())
        if not total:
            return "No tools left to load: every tool is already loaded."
        found = self._best_deferred(query, SEARCH_RESULTS)
        if not found:
            return (
                f"Nothing matches {query!r} among the {total} tools not loaded yet."
                " Try other words."
            )
        head = f"Best {len(found)} of {total} tools not loaded yet for {query!r}:"
        tail = "Load them with request_tools(tool_names=[...])."
        lines = [catalog_line(t, SEARCH_DESCRIPTION_CHARS) for t in found]
        return "\n".join([head, *lines, tail])

    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        if name != NAME:
            return ToolResult.fail(f"Unknown tool {name!r}")
        names = [str(n) for n in args.get("tool_names") or []]
        query = str(args.get("query") or "").strip()
        if not names and not query:
            return ToolResult.fail(
                "Invalid arguments for 'request_tools': pass query (to search) or"
                " tool_names (to load).",
                step=NAME,
            )
        parts: list[str] = []
        activation = Activation()
        if names:
            activation = self.active.activate(names)
            parts.append(activation_text(activation))
        if query:
            parts.append(self.search(query))
        text = "\n\n".join(parts)
        if names and not query and not activation.loaded and not activation.already:
            return ToolResult.fail(text, step=NAME)
        return ToolResult(ok=True, output=text, step=NAME, loaded_tools=activation.loaded)
