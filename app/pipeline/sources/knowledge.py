"""`knowledge(query, knowledge_base?, limit=5)`: search the agent's knowledge bases.

One tool per agent whatever the number of bases (category `knowledge`, added with the
built-ins). Its description lists the bases with their document counts; results carry their
source (knowledge base / document), position (heading path, character offset) and score, and
below the agent's `knowledge.min_score` the tool says that nothing relevant was found instead
of returning noise. See docs/contract.md §12.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from app.knowledge.backend import KnowledgeBackend
from app.knowledge.index import Hit
from app.knowledge.models import KnowledgeBase
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset
from app.tools.render import clip_output
from app.tools.suggest import unknown_name

NAME = "knowledge"
KIND = "knowledge"
DEFAULT_LIMIT = 5
MAX_LIMIT = 20
DEFAULT_MIN_SCORE = 0.3
_LISTED = 20
"""Bases listed in the description; the enum of `knowledge_base` still names every one."""
_STUB_CHARS = 120


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _stub(base: KnowledgeBase) -> str:
    line = f"- {base.name} ({_plural(base.document_count, 'document')})"
    if base.description.strip():
        line += f": {' '.join(base.description.split())}"
    return line if len(line) <= _STUB_CHARS else line[: _STUB_CHARS - 1] + "…"


def description(bases: Sequence[KnowledgeBase]) -> str:
    listed = sorted(bases, key=lambda b: (-b.document_count, b.name))[:_LISTED]
    lines = [
        "Search your knowledge bases for passages that answer a question; cite the source "
        "(document and section) of what you use. Knowledge bases:",
        *(_stub(b) for b in listed),
    ]
    if len(bases) > len(listed):
        lines.append(f"… and {len(bases) - len(listed)} more (name one in knowledge_base).")
    return "\n".join(lines)


def render_hits(hits: Sequence[Hit], names: Mapping[uuid.UUID, str]) -> str:
    blocks = []
    for rank, hit in enumerate(hits, start=1):
        chunk = hit.chunk
        where = f" > {chunk.heading}" if chunk.heading else ""
        source = f"{names.get(chunk.knowledge_base_id, '?')}/{chunk.document}"
        blocks.append(
            f"[{rank}] source: {source}{where} (offset {chunk.offset}) · score {hit.score:.2f}\n"
            f"{chunk.text}"
        )
    return "\n\n".join(blocks)


class KnowledgeTool:
    def __init__(
        self,
        bases: Sequence[KnowledgeBase],
        backend: KnowledgeBackend | None,
        *,
        min_score: float = DEFAULT_MIN_SCORE,
    ) -> None:
        self._bases = {b.name: b for b in bases}
        self._backend = backend
        self._min_score = min_score
        self.tool = ToolDef(
            name=NAME,
            description=description(bases),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look for"},
                    "knowledge_base": {"type": "string", "enum": sorted(self._bases)},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                },
                "required": ["query"],
            },
            kind=KIND,
            target=NAME,
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        query = str(args.get("query") or "").strip()
        if not query:
            return ToolResult.fail("knowledge: query must not be empty")
        name = args.get("knowledge_base")
        bases = list(self._bases.values())
        if name:
            if name not in self._bases:
                return ToolResult.fail(unknown_name("knowledge base", str(name), list(self._bases)))
            bases = [self._bases[name]]
        if self._backend is None:
            return ToolResult.fail("knowledge: search is not available in this process")
        limit = max(1, min(MAX_LIMIT, int(args.get("limit") or DEFAULT_LIMIT)))
        hits = await self._backend.search(
            knowledge_base_ids=[b.id for b in bases], query=query, limit=limit
        )
        scope = ", ".join(b.name for b in bases)
        step = f"knowledge:{name or '*'}"
        best = max((h.score for h in hits), default=0.0)
        if best < self._min_score:
            return ToolResult.success(
                f"Nothing relevant found in {scope} for {query!r} (best score {best:.2f}, "
                f"below min_score {self._min_score:.2f}). Do not answer from these knowledge "
                "bases; say that they do not cover it, or try other words.",
                step=step,
            )
        kept = [h for h in hits if h.score >= self._min_score]
        names = {b.id: b.name for b in bases}
        header = f"{_plural(len(kept), 'passage')} from {scope} for {query!r}, best first:"
        return ToolResult.success(clip_output(f"{header}\n\n{render_hits(kept, names)}"), step=step)


def knowledge_toolset(
    bases: Sequence[KnowledgeBase],
    backend: KnowledgeBackend | None,
    *,
    min_score: float = DEFAULT_MIN_SCORE,
) -> FunctionToolset | None:
    """The agent's `knowledge` tool, or None when it has no knowledge base."""
    if not bases:
        return None
    tool = KnowledgeTool(bases, backend, min_score=min_score)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="knowledge")
