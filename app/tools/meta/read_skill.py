"""`read_skill(name?, search?)`: a skill's full content on demand, or a search over the skills.

Stubs sit in the system prompt; above 20 skills only the best-ranked ones have a stub, and
`search` finds the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.skills.models import Skill
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.disclosure import Entry, EntryIndex, index_for, name_schema, search_text
from app.tools.function import FunctionTool, FunctionToolset
from app.tools.render import clip_output
from app.tools.stubs import skill_body
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

NAME = "read_skill"
DESCRIPTION = (
    "Read the full instructions of a skill from Available Skills before using it;"
    " search: find skills by query."
)
_SEARCH_HINT = "Read one with read_skill(name=<name>)."


class ReadSkill:
    def __init__(self, skills: Sequence[Skill]) -> None:
        self._skills = {s.name: s for s in skills}
        self._index: EntryIndex | None = None
        self.tool = ToolDef(
            name=NAME,
            description=DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {
                    "name": name_schema(list(self._skills), noun="skill", finder="search"),
                    "search": {"type": "string"},
                },
            },
            kind="skill",
            target="skill",
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        query = args.get("search")
        if isinstance(query, str) and query.strip() and not args.get("name"):
            if self._index is None:
                entries = [Entry(s.name, s.description) for s in self._skills.values()]
                self._index = index_for(entries)
            return ToolResult.success(
                search_text(query, self._index, noun="skills", hint=_SEARCH_HINT),
                step="skill:search",
            )
        name = str(args.get("name") or "")
        if not name:
            return ToolResult.fail(invalid_arguments(NAME, "pass name (to read) or search"))
        skill = self._skills.get(name)
        if skill is None:
            return ToolResult.fail(unknown_name("skill", name, list(self._skills)))
        text = f"# Skill: {skill.name}\n\n{skill_body(skill)}"
        return ToolResult.success(clip_output(text), step=f"skill:{skill.name}")


def read_skill_toolset(skills: Sequence[Skill]) -> FunctionToolset:
    tool = ReadSkill(skills)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="skills")
