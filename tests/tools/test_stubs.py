"""Stub formats and their truncation rules (docs/contract.md §4.3)."""

from __future__ import annotations

from app.pipeline.sources.stubs import (
    connector_stub,
    database_stub,
    mcp_stub,
    skill_stub,
    skills_section,
)
from tests.fixtures.pipeline import (
    make_action,
    make_connector,
    make_database,
    make_server,
    make_skill,
    mcp_tool,
    table,
)


def test_skill_stub_is_cut_to_120_chars() -> None:
    skill = make_skill("s", "x" * 200)
    stub = skill_stub(skill)
    assert stub == "- s: " + "x" * 112 + "..."
    assert len(stub) == 120


def test_skill_stub_at_exactly_120_chars_is_kept() -> None:
    stub = skill_stub(make_skill("s", "y" * 115))
    assert len(stub) == 120
    assert not stub.endswith("...")


def test_skill_stub_flattens_newlines() -> None:
    assert skill_stub(make_skill("s", "Line one.\n\n  Line two.")) == "- s: Line one. Line two."


def test_skills_section() -> None:
    skills = [make_skill("a", "First."), make_skill("b", "")]
    assert skills_section(skills) == "## Available Skills\n- a: First.\n- b:"
    assert skills_section([]) == ""


def test_connector_stub_lists_at_most_20_actions() -> None:
    actions = [make_action(f"a{i:02d}") for i in range(23)]
    stub = connector_stub(make_connector("big", actions, description="Big API."))
    names = ", ".join(f"a{i:02d}" for i in range(20))
    assert stub == f"- big: Big API. Actions (23): {names} … and 3 more"


def test_connector_stub_cuts_long_descriptions() -> None:
    stub = connector_stub(make_connector("c", [make_action("x")], description="d" * 100))
    assert stub == "- c: " + "d" * 77 + ". Actions (1): x"


def test_database_stub_lists_ten_tables_and_the_count() -> None:
    tables = [table(f"t{i:02d}") for i in range(12)] + [table("secret", hidden=True)]
    stub = database_stub(make_database("wh", tables))
    names = ", ".join(f"t{i:02d}" for i in range(10))
    assert stub == f"- wh: Tables (12): {names} … and 2 more"


def test_mcp_stub_lists_twenty_tools_and_the_count() -> None:
    server = make_server("gh", [mcp_tool(f"t{i:03d}") for i in range(117)], description="GitHub")
    names = ", ".join(f"t{i:03d}" for i in range(20))
    assert mcp_stub(server) == f"- gh: GitHub. Tools (117): {names} … and 97 more"


def test_mcp_stub_skips_malformed_cache_entries() -> None:
    server = make_server("gh", [mcp_tool("ok"), {"description": "no name"}, "junk"])  # type: ignore[list-item]
    assert mcp_stub(server) == "- gh: Tools (1): ok"
