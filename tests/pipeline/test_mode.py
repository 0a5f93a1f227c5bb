"""Mode resolution (docs/contract.md §4.2): agent config > environment > progressive, per kind."""

from __future__ import annotations

from typing import Any

import pytest

from app.agents.config import AgentConfig
from app.config import SelectionStrategy, SkillMode, ToolMode
from app.errors import Invalid
from app.pipeline.mode import ResolvedModes, parse_agent_config, resolve_config, resolve_modes
from tests.fixtures.pipeline import make_settings

P, L, INLINE = ToolMode.PROGRESSIVE, ToolMode.LEGACY, SkillMode.INLINE
SP = SkillMode.PROGRESSIVE


@pytest.mark.parametrize(
    ("agent", "env", "expected"),
    [
        # nothing set anywhere → progressive everywhere
        ({}, {}, ResolvedModes()),
        # environment only
        ({}, {"connector_tool_mode": "legacy"}, ResolvedModes(connector=L)),
        ({}, {"skill_tool_mode": "inline"}, ResolvedModes(skill=INLINE)),
        # agent only
        ({"mcp_tool_mode": "legacy"}, {}, ResolvedModes(mcp=L)),
        ({"database_tool_mode": "legacy"}, {}, ResolvedModes(database=L)),
        # agent beats environment, in both directions
        ({"mcp_tool_mode": "progressive"}, {"mcp_tool_mode": "legacy"}, ResolvedModes()),
        (
            {"skill_tool_mode": "inline"},
            {"skill_tool_mode": "progressive"},
            ResolvedModes(skill=INLINE),
        ),
        # explicit null in the agent config falls through to the environment
        ({"database_tool_mode": None}, {"database_tool_mode": "legacy"}, ResolvedModes(database=L)),
        # every kind independently
        (
            {"connector_tool_mode": "legacy", "skill_tool_mode": "progressive"},
            {"database_tool_mode": "legacy", "skill_tool_mode": "inline"},
            ResolvedModes(skill=SP, connector=L, database=L, mcp=P),
        ),
        (
            {},
            {
                "skill_tool_mode": "inline",
                "connector_tool_mode": "legacy",
                "database_tool_mode": "legacy",
                "mcp_tool_mode": "legacy",
            },
            ResolvedModes.all_legacy(),
        ),
    ],
)
def test_mode_precedence(
    agent: dict[str, Any], env: dict[str, Any], expected: ResolvedModes
) -> None:
    assert resolve_modes(AgentConfig.model_validate(agent), make_settings(**env)) == expected


def test_seed_variable_spellings_reach_the_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TOOL_MODE", "legacy")
    monkeypatch.setenv("QUIVER_SKILL_TOOL_MODE", "inline")
    modes = resolve_modes(AgentConfig(), make_settings())
    assert modes == ResolvedModes(skill=INLINE, mcp=L)


@pytest.mark.parametrize(
    ("agent", "env", "threshold", "maximum", "strategy"),
    [
        ({}, {}, 12, 6, SelectionStrategy.HYBRID),
        ({}, {"tool_selection_threshold": 30, "tool_selection_max": 8}, 30, 8, "hybrid"),
        ({"tool_selection_threshold": 5}, {"tool_selection_threshold": 30}, 5, 6, "hybrid"),
        ({"tool_selection_max": 3}, {"tool_selection_max": 9}, 12, 3, "hybrid"),
        ({}, {"tool_selection_strategy": "llm"}, 12, 6, "llm"),
        (
            {"tool_selection_strategy": "lexical"},
            {"tool_selection_strategy": "llm"},
            12,
            6,
            "lexical",
        ),
    ],
)
def test_selection_limits_precedence(
    agent: dict[str, Any], env: dict[str, Any], threshold: int, maximum: int, strategy: str
) -> None:
    config = resolve_config(AgentConfig.model_validate(agent), make_settings(**env))
    assert (config.selection_threshold, config.selection_max) == (threshold, maximum)
    assert config.selection_strategy == strategy


def test_max_iterations_and_primitives() -> None:
    config = resolve_config(
        AgentConfig.model_validate({"max_iterations": 7, "tool_profile": {"include": ["jira__*"]}}),
        make_settings(),
    )
    assert config.max_iterations == 7
    assert config.tool_profile is not None
    assert config.tool_profile.include == ["jira__*"]
    assert config.step_iteration is None
    assert resolve_config(AgentConfig(), make_settings()).max_iterations == 20


def test_modes_as_dict() -> None:
    assert ResolvedModes(connector=L).as_dict() == {
        "skill": "progressive",
        "connector": "legacy",
        "database": "progressive",
        "mcp": "progressive",
    }


def test_parse_agent_config_names_the_bad_key() -> None:
    assert parse_agent_config(None) == AgentConfig()
    with pytest.raises(Invalid, match=r"model_config_json\.mcp_tool_mode"):
        parse_agent_config({"mcp_tool_mode": "sometimes"})
    with pytest.raises(Invalid, match=r"model_config_json\.bogus"):
        parse_agent_config({"bogus": 1})
