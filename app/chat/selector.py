"""The `llm` selection strategy: one model call that names the tools to keep.

See docs/contract.md §4.4.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from app.llm.client import LlmClient
from app.llm.types import ChatMessage
from app.pipeline.selection import LlmSelector
from app.tools.base import ToolDef

_ARRAY = re.compile(r"\[.*?\]", re.DOTALL)
_INSTRUCTIONS = (
    "You select tools for an AI agent. From the catalog, choose at most {k} tools most useful "
    "for the user's request. Reply with only a JSON array of tool names, best first."
)


def parse_names(text: str) -> list[str]:
    """The first JSON array of strings in `text` (models sometimes wrap it in prose)."""
    for match in _ARRAY.finditer(text):
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(value, list):
            return [v for v in value if isinstance(v, str)]
    raise ValueError("the selection reply has no JSON array of tool names")


def llm_selector(llm: LlmClient, *, model: str | None = None) -> LlmSelector:
    async def select(query: str, tools: Sequence[ToolDef], k: int) -> list[str]:
        catalog = "\n".join(f"- {t.name}: {t.description[:160]}" for t in tools)
        completion = await llm.complete(
            [
                ChatMessage.system(_INSTRUCTIONS.format(k=k)),
                ChatMessage.user(f"Catalog:\n{catalog}\n\nRequest: {query}"),
            ],
            tools=None,
            model=model,
        )
        return parse_names(completion.text)

    return select
