"""One Settings object; the six seed variables in both spellings; loud failures.

See docs/contract.md §1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from app.cli import main
from app.config import ConfigError, SkillMode, ToolMode, load_settings

SEEDS = {
    "SKILL_TOOL_MODE": ("skill_tool_mode", "inline", SkillMode.INLINE),
    "CONNECTOR_TOOL_MODE": ("connector_tool_mode", "legacy", ToolMode.LEGACY),
    "DATABASE_TOOL_MODE": ("database_tool_mode", "legacy", ToolMode.LEGACY),
    "MCP_TOOL_MODE": ("mcp_tool_mode", "legacy", ToolMode.LEGACY),
    "REACT_TOOL_SELECTION_THRESHOLD": ("tool_selection_threshold", "30", 30),
    "REACT_TOOL_SELECTION_MAX": ("tool_selection_max", "9", 9),
}
OTHER_VALUES = {
    "SKILL_TOOL_MODE": ("progressive", SkillMode.PROGRESSIVE),
    "CONNECTOR_TOOL_MODE": ("progressive", ToolMode.PROGRESSIVE),
    "DATABASE_TOOL_MODE": ("progressive", ToolMode.PROGRESSIVE),
    "MCP_TOOL_MODE": ("progressive", ToolMode.PROGRESSIVE),
    "REACT_TOOL_SELECTION_THRESHOLD": ("40", 40),
    "REACT_TOOL_SELECTION_MAX": ("2", 2),
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start from an environment with no Quiver variables in either spelling."""
    for name in list(os.environ):
        if name.upper().startswith("QUIVER_") or name.upper() in SEEDS:
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = load_settings()
    assert settings.skill_tool_mode is SkillMode.PROGRESSIVE
    for field in ("connector_tool_mode", "database_tool_mode", "mcp_tool_mode"):
        assert getattr(settings, field) is ToolMode.PROGRESSIVE
    assert (settings.tool_selection_threshold, settings.tool_selection_max) == (12, 6)
    assert settings.database_url == ""
    assert settings.async_database_url == (
        f"sqlite+aiosqlite:///{(Path('.quiver') / 'quiver.db').resolve()}"
    )
    assert (settings.secret_keys, settings.admin_token) == ([], None)
    assert (settings.mcp_stdio_commands, settings.egress_allow_cidrs) == ([], [])


@pytest.mark.parametrize("seed", sorted(SEEDS))
@pytest.mark.parametrize("prefix", ["", "QUIVER_"])
def test_seed_variables_accept_both_spellings(
    monkeypatch: pytest.MonkeyPatch, seed: str, prefix: str
) -> None:
    field, raw, expected = SEEDS[seed]
    monkeypatch.setenv(prefix + seed, raw)
    assert getattr(load_settings(), field) == expected


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_quiver_spelling_wins_when_both_are_set(monkeypatch: pytest.MonkeyPatch, seed: str) -> None:
    """Documented precedence: `QUIVER_<NAME>` first, then `<NAME>` (AliasChoices order)."""
    field, raw, expected = SEEDS[seed]
    other_raw, other = OTHER_VALUES[seed]
    monkeypatch.setenv(f"QUIVER_{seed}", raw)
    monkeypatch.setenv(seed, other_raw)
    assert getattr(load_settings(), field) == expected
    monkeypatch.setenv(f"QUIVER_{seed}", other_raw)
    monkeypatch.setenv(seed, raw)
    assert getattr(load_settings(), field) == other


def test_postgres_url_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    for url in ("postgres://u@db/q", "postgresql://u@db/q", "postgresql+asyncpg://u@db/q"):
        monkeypatch.setenv("QUIVER_DATABASE_URL", url)
        assert load_settings().async_database_url == "postgresql+asyncpg://u@db/q", url


def test_lists_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = [Fernet.generate_key().decode() for _ in range(2)]
    monkeypatch.setenv("QUIVER_SECRET_KEYS", f" {keys[0]} ,{keys[1]},")
    monkeypatch.setenv("QUIVER_EGRESS_ALLOW_CIDRS", "10.0.0.0/8, fd00::/8")
    monkeypatch.setenv("QUIVER_MCP_STDIO_COMMANDS", "uvx,npx")
    monkeypatch.setenv("QUIVER_DATABASE_URL", "postgresql://u@db:5432/quiver")
    monkeypatch.setenv("QUIVER_LOG_LEVEL", "debug")
    settings = load_settings()
    assert [k.get_secret_value() for k in settings.secret_keys] == keys
    assert settings.egress_allow_cidrs == ["10.0.0.0/8", "fd00::/8"]
    assert settings.mcp_stdio_commands == ["uvx", "npx"]
    assert settings.async_database_url == "postgresql+asyncpg://u@db:5432/quiver"
    assert settings.log_level == "DEBUG"
    assert keys[0] not in repr(settings), "secrets are SecretStr"


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("SKILL_TOOL_MODE", "legacy", "SKILL_TOOL_MODE"),
        ("QUIVER_CONNECTOR_TOOL_MODE", "inline", "CONNECTOR_TOOL_MODE"),
        ("DATABASE_TOOL_MODE", "", "DATABASE_TOOL_MODE"),
        ("MCP_TOOL_MODE", "LEGACY!", "MCP_TOOL_MODE"),
        ("REACT_TOOL_SELECTION_THRESHOLD", "0", "REACT_TOOL_SELECTION_THRESHOLD"),
        ("QUIVER_REACT_TOOL_SELECTION_MAX", "many", "REACT_TOOL_SELECTION_MAX"),
        ("QUIVER_SECRET_KEYS", "not-a-fernet-key", "QUIVER_SECRET_KEYS"),
        ("QUIVER_EGRESS_ALLOW_CIDRS", "10.0.0.0/8,internal", "QUIVER_EGRESS_ALLOW_CIDRS"),
        ("QUIVER_DATABASE_URL", "mysql://u@h/db", "QUIVER_DATABASE_URL"),
        ("QUIVER_PORT", "70000", "QUIVER_PORT"),
        ("QUIVER_LOG_LEVEL", "chatty", "QUIVER_LOG_LEVEL"),
        ("QUIVER_LLM_TIMEOUT_S", "-1", "QUIVER_LLM_TIMEOUT_S"),
        ("QUIVER_TOOL_SELECTION_STRATEGY", "random", "QUIVER_TOOL_SELECTION_STRATEGY"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, named: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=named) as info:
        load_settings()
    assert str(info.value).startswith("invalid configuration: ")


def test_every_invalid_variable_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILL_TOOL_MODE", "nope")
    monkeypatch.setenv("QUIVER_PORT", "nope")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert "SKILL_TOOL_MODE" in str(info.value)
    assert "QUIVER_PORT" in str(info.value)


def test_cli_refuses_to_start_with_a_bad_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("QUIVER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MCP_TOOL_MODE", "sometimes")
    assert main(["migrate"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("quiver: invalid configuration: ")
    assert "MCP_TOOL_MODE" in captured.err
    assert list(tmp_path.iterdir()) == [], "nothing was created"
