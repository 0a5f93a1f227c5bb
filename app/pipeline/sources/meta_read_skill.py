"""`read_skill(name?, path?, search?)`: a skill's full content on demand, one file of its
folder, or a search over the skills.

Stubs sit in the system prompt; above 20 skills only the best-ranked ones have a stub, and
`search` finds the others. A skill's text ends with the list of its files (`reference/…`,
`scripts/…`); `read_skill(name, path)` (or `name="<skill>/<path>"`) returns one of them.
Scripts are listed and readable as text, never run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.pipeline.sources.disclosure import (
    ENUM_MAX,
    Entry,
    EntryIndex,
    index_for,
    name_schema,
    search_text,
)
from app.pipeline.sources.stubs import skill_body, skill_files_section
from app.skills.backend import SkillFileBackend
from app.skills.models import Skill
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset
from app.tools.render import clip_output
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

NAME = "read_skill"
DESCRIPTION = (
    "Read the full instructions of a skill from Available Skills before using it;"
    " path: read one file its instructions list; search: find skills by query."
)
_SEARCH_HINT = "Read one with read_skill(name=<name>)."


def _name_schema(skills: Sequence[Skill]) -> dict[str, Any]:
    names = [s.name for s in skills]
    if not any(s.file_index for s in skills):
        return name_schema(names, noun="skill", finder="search")
    listed = ", ".join(names) if len(names) <= ENUM_MAX else f"{len(names)} skills (search)"
    return {
        "type": "string",
        "description": f"A skill: {listed}; or '<skill>/<path>' for one of its files.",
    }


class ReadSkill:
    def __init__(self, skills: Sequence[Skill], files: SkillFileBackend | None = None) -> None:
        self._skills = {s.name: s for s in skills}
        self._files = files
        self._index: EntryIndex | None = None
        properties: dict[str, Any] = {
            "name": _name_schema(skills),
            "search": {"type": "string"},
        }
        if any(s.file_index for s in skills):
            properties["path"] = {
                "type": "string",
                "description": "A file of the skill's folder, as its instructions list it.",
            }
        self.tool = ToolDef(
            name=NAME,
            description=DESCRIPTION,
            parameters={"type": "object", "properties": properties},
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
        name = str(args.get("name") or "").strip()
        path = str(args.get("path") or "").strip()
        if not name:
            return ToolResult.fail(invalid_arguments(NAME, "pass name (to read) or search"))
        if name not in self._skills and "/" in name and not path:
            name, path = name.split("/", 1)
        skill = self._skills.get(name)
        if skill is None:
            return ToolResult.fail(unknown_name("skill", name, list(self._skills)))
        path = path.removeprefix("./")
        if not path or path == "SKILL.md":
            text = f"# Skill: {skill.name}\n\n{skill_body(skill)}{skill_files_section(skill)}"
            return ToolResult.success(clip_output(text), step=f"skill:{skill.name}")
        return await self._read_file(skill, path)

    async def _read_file(self, skill: Skill, path: str) -> ToolResult:
        step = f"skill:{skill.name}/{path}"
        known = [str(f["path"]) for f in skill.file_index or []]
        if path not in known:
            return ToolResult.fail(
                unknown_name("file", path, known, scope=f"skill {skill.name!r}"), step=step
            )
        found = await self._files.read_file(skill.id, path) if self._files else None
        if found is None:
            return ToolResult.fail(
                f"the file {path!r} of skill {skill.name!r} cannot be read here", step=step
            )
        if found.text is None:
            return ToolResult.success(
                f"{skill.name}/{path}: {found.media_type}, {found.size} bytes (not text; "
                "it is part of the skill's folder, not readable here)",
                step=step,
            )
        return ToolResult.success(clip_output(f"# {skill.name}/{path}\n\n{found.text}"), step=step)


def read_skill_toolset(
    skills: Sequence[Skill], files: SkillFileBackend | None = None
) -> FunctionToolset:
    tool = ReadSkill(skills, files)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="skills")
