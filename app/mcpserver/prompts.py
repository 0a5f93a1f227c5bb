"""MCP prompts on the agent endpoint: the agent's skills, one prompt each.

`prompts/get` returns the skill's text as `read_skill` gives it to the model (its instructions,
then the files of its folder, which `resources/read` serves). An agent whose
`tool_categories` leave skills out has no prompts.
"""

from __future__ import annotations

import mcp_types as types
from mcp.shared.exceptions import MCPError

from app.agents.models import Agent
from app.pipeline.sources.stubs import skill_body, skill_files_section
from app.skills.models import Skill
from app.tools.suggest import unknown_name


def agent_skills(agent: Agent) -> list[Skill]:
    categories = agent.tool_categories
    if categories is not None and "skill" not in categories:
        return []
    return list(agent.skills)


def list_prompts(agent: Agent) -> types.ListPromptsResult:
    return types.ListPromptsResult(
        prompts=[
            types.Prompt(name=skill.name, description=skill.description or None, arguments=[])
            for skill in agent_skills(agent)
        ]
    )


def get_prompt(agent: Agent, name: str) -> types.GetPromptResult:
    skills = {s.name: s for s in agent_skills(agent)}
    skill = skills.get(name)
    if skill is None:
        raise MCPError(types.INVALID_PARAMS, unknown_name("prompt", name, list(skills)))
    text = f"# Skill: {skill.name}\n\n{skill_body(skill)}{skill_files_section(skill)}"
    return types.GetPromptResult(
        description=skill.description or None,
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
        ],
    )


def prompts_fingerprint(agent: Agent) -> tuple[tuple[str, str], ...]:
    """What a client's prompt list depends on: a change means `prompts/list_changed`."""
    return tuple((s.name, str(s.updated_at)) for s in agent_skills(agent))
