"""`read_skill(name)`: the skill's full content on demand (stubs sit in the system prompt)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.pipeline.sources.stubs import skill_body
from app.skills.models import Skill
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset
from app.tools.render import clip_output
from app.tools.suggest import unknown_name

NAME = "read_skill"
DESCRIPTION = "Read the full instructions of a skill from Available Skills before using it."


class ReadSkill:
    def __init__(self, skills: Sequence[Skill]) -> None:
        self._skills = {s.name: s for s in skills}
        self.tool = ToolDef(
            name=NAME,
            description=DESCRIPTION,
            parameters={
                "type": "object",
                "properties": {"name": {"type": "string", "enum": list(self._skills)}},
                "required": ["name"],
            },
            kind="skill",
            target="skill",
        )

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = str(args.get("name", ""))
        skill = self._skills.get(name)
        if skill is None:
            return ToolResult.fail(unknown_name("skill", name, list(self._skills)))
        text = f"# Skill: {skill.name}\n\n{skill_body(skill)}"
        return ToolResult.success(clip_output(text), step=f"skill:{skill.name}")


def read_skill_toolset(skills: Sequence[Skill]) -> FunctionToolset:
    tool = ReadSkill(skills)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="skills")
