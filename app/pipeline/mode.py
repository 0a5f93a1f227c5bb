"""Mode and limit resolution: agent config > environment (Settings) > default.

Pure functions: no I/O, no clock. Every kind resolves independently.

See docs/contract.md §4.2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from app.agents.config import (
    AgentConfig,
    Approval,
    Knowledge,
    PreHydration,
    StepIteration,
    ToolProfile,
)
from app.config import SelectionStrategy, Settings, SkillMode, ToolMode
from app.errors import Invalid


@dataclass(frozen=True, kw_only=True)
class ResolvedModes:
    skill: SkillMode = SkillMode.PROGRESSIVE
    connector: ToolMode = ToolMode.PROGRESSIVE
    database: ToolMode = ToolMode.PROGRESSIVE
    mcp: ToolMode = ToolMode.PROGRESSIVE

    def as_dict(self) -> dict[str, str]:
        """`{"skill": "progressive", "connector": "legacy", …}` for events and the preview."""
        return {
            "skill": self.skill.value,
            "connector": self.connector.value,
            "database": self.database.value,
            "mcp": self.mcp.value,
        }

    @classmethod
    def all_legacy(cls) -> ResolvedModes:
        """The pre-progressive baseline: skills inline, one tool per leaf."""
        return cls(
            skill=SkillMode.INLINE,
            connector=ToolMode.LEGACY,
            database=ToolMode.LEGACY,
            mcp=ToolMode.LEGACY,
        )


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """The agent's run configuration: `model_config_json` over Settings, resolved once per run.

    Assembly and the loop read it; nothing reads the raw `model_config_json` after this.
    """

    modes: ResolvedModes
    selection_threshold: int
    selection_max: int
    selection_strategy: SelectionStrategy
    max_iterations: int
    tool_profile: ToolProfile | None
    step_iteration: StepIteration | None
    pre_hydration: PreHydration | None
    temperature: float | None
    context_budget: int
    """Tokens the prompt may use: the model's context size minus the output reserve."""
    approval: Approval | None = None
    """Which calls wait for a person (see `app.approvals`)."""
    knowledge: Knowledge | None = None
    """The `knowledge` tool's settings (`min_score`)."""
    index_inline_max: int | None = None
    """Tool sets above this size never get their ranker built on a request (see
    `pipeline/index_builds.py`); None: built where needed."""


def parse_agent_config(raw: dict[str, Any] | None) -> AgentConfig:
    """Stored `model_config_json` → AgentConfig; a bad stored value is a 422 naming the key."""
    try:
        return AgentConfig.model_validate(raw or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "model_config_json"
        raise Invalid(f"model_config_json.{where}: {first['msg']}") from exc


def resolve_modes(config: AgentConfig, settings: Settings) -> ResolvedModes:
    """Per kind: the agent's key if set, else the environment's value (default progressive)."""
    return ResolvedModes(
        skill=config.skill_tool_mode or settings.skill_tool_mode,
        connector=config.connector_tool_mode or settings.connector_tool_mode,
        database=config.database_tool_mode or settings.database_tool_mode,
        mcp=config.mcp_tool_mode or settings.mcp_tool_mode,
    )


def resolve_config(config: AgentConfig, settings: Settings) -> RunConfig:
    return RunConfig(
        modes=resolve_modes(config, settings),
        selection_threshold=config.tool_selection_threshold or settings.tool_selection_threshold,
        selection_max=config.tool_selection_max or settings.tool_selection_max,
        selection_strategy=config.tool_selection_strategy or settings.tool_selection_strategy,
        max_iterations=config.max_iterations,
        tool_profile=config.tool_profile,
        step_iteration=config.step_iteration,
        pre_hydration=config.pre_hydration,
        temperature=config.temperature,
        approval=config.approval,
        knowledge=config.knowledge,
        index_inline_max=settings.tool_index_inline_max,
        context_budget=max(
            256,
            (config.context_tokens or settings.llm_context_tokens)
            - (config.output_reserve_tokens or settings.llm_output_reserve_tokens),
        ),
    )


def run_config(raw: dict[str, Any] | None, settings: Settings) -> RunConfig:
    """An agent's stored `model_config_json` resolved over Settings (once per run)."""
    return resolve_config(parse_agent_config(raw), settings)
