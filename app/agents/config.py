"""`model_config_json`: the per-agent configuration, validated on write.

See docs/contract.md §4.2, §6.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.config import SelectionStrategy, SkillMode, ToolMode
from app.kit.schemas import Flag


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolProfile(_Strict):
    """docs/contract.md §6.1: include globs (empty = all) → exclude globs → verified-only → cap."""

    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    max_tools: int | None = Field(default=None, ge=0)
    require_verified: Flag = False


class StepIteration(_Strict):
    """docs/contract.md §6.2 progress tracker."""

    max_reattempts_per_step: int = Field(default=2, ge=1)
    similarity_threshold: float = Field(default=0.85, ge=0.0, le=1.0)
    on_limit_reached: Literal["skip_step", "abort_task", "escalate"] = "skip_step"


class CustomPattern(_Strict):
    ref_type: str = Field(min_length=1, max_length=64)
    pattern: str = Field(min_length=1, max_length=1000)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
        return value


class PreHydration(_Strict):
    """docs/contract.md §6.3 pre-hydration."""

    custom_patterns: list[CustomPattern] = Field(default_factory=list)
    resolution_tools: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=15.0, gt=0, le=300)
    max_references: int = Field(default=10, ge=0, le=100)
    max_context_tokens: int = Field(default=4000, ge=0, le=200_000)


class Approval(_Strict):
    """Human approval: calls whose tool name or target matches a glob wait for a person."""

    tools: list[str] = Field(default_factory=list)
    """Globs (the tool profile's rules) over the tool name and the call's target."""
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)


class Knowledge(_Strict):
    """The `knowledge` tool (docs/contract.md §12)."""

    min_score: float = Field(default=0.3, ge=0.0, le=1.0)
    """Below this best score the tool answers that nothing relevant was found."""


class AgentConfig(_Strict):
    """Every key is optional; unknown keys are refused (422 naming the key)."""

    skill_tool_mode: SkillMode | None = None
    connector_tool_mode: ToolMode | None = None
    database_tool_mode: ToolMode | None = None
    mcp_tool_mode: ToolMode | None = None
    tool_selection_threshold: int | None = Field(default=None, ge=1)
    tool_selection_max: int | None = Field(default=None, ge=1)
    tool_selection_strategy: SelectionStrategy | None = None
    max_iterations: int = Field(default=20, ge=1, le=200)
    context_tokens: int | None = Field(default=None, ge=1024)
    """The model's context size; default from QUIVER_LLM_CONTEXT_TOKENS."""
    output_reserve_tokens: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    tool_profile: ToolProfile | None = None
    step_iteration: StepIteration | None = None
    pre_hydration: PreHydration | None = None
    approval: Approval | None = None
    knowledge: Knowledge | None = None
