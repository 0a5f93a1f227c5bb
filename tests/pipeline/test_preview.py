"""The pipeline preview: resolved modes, prompt, tools, selection and token counts."""

from __future__ import annotations

from app.kit.tokens import count_json_tokens, count_tokens
from app.pipeline.assemble import assemble_toolset
from app.pipeline.mode import ResolvedModes
from app.pipeline.preview import count_prompt_tokens, preview_toolset
from app.pipeline.sources.backends import Backends
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import make_settings


def test_count_prompt_tokens_adds_prompt_and_schemas() -> None:
    tools = [{"type": "function", "function": {"name": "x", "description": "d", "parameters": {}}}]
    counts = count_prompt_tokens("Hello there.", tools)
    assert counts.system_prompt == count_tokens("Hello there.")
    assert counts.tools == count_json_tokens(tools)
    assert counts.total == counts.system_prompt + counts.tools
    assert count_prompt_tokens("", []).total == 0


async def test_preview_progressive_against_legacy(backends: Backends) -> None:
    settings = make_settings()
    preview = await preview_toolset(full_agent(), settings, backends, "open issues")
    current = await assemble_toolset(full_agent(), settings, backends, "open issues")
    legacy = await assemble_toolset(
        full_agent(), settings, backends, "", modes=ResolvedModes.all_legacy(), select=False
    )
    assert preview.modes == ResolvedModes().as_dict()
    assert preview.legacy_modes == ResolvedModes.all_legacy().as_dict()
    assert preview.system_prompt == current.system_prompt
    assert preview.tools == current.openai_tools()
    assert [t["function"]["name"] for t in preview.tools] == [
        "http_fetch",
        "recall_knowledge",
        "connector",
        "database",
        "mcp",
        "read_skill",
    ]
    assert preview.selection is None
    assert preview.tokens == count_prompt_tokens(current.system_prompt, current.openai_tools())
    assert preview.legacy_tokens == count_prompt_tokens(legacy.system_prompt, legacy.openai_tools())
    assert preview.saved_tokens == preview.legacy_tokens.total - preview.tokens.total
    assert preview.saved_ratio == round(preview.saved_tokens / preview.legacy_tokens.total, 4)


async def test_preview_shows_the_selection_above_threshold(backends: Backends) -> None:
    agent = full_agent(
        config={
            "connector_tool_mode": "legacy",
            "mcp_tool_mode": "legacy",
            "tool_selection_threshold": 4,
            "tool_selection_max": 2,
        }
    )
    preview = await preview_toolset(agent, make_settings(), backends, "search github issues")
    assert preview.modes["connector"] == "legacy"
    assert preview.selection is not None
    assert preview.selection.strategy == "hybrid"
    assert preview.selection.total == 10
    assert preview.selection.max == 2
    assert preview.selection.pinned == ["database", "read_skill"]
    assert preview.selection.selected[0] == "github__search_issues"
    names = [t["function"]["name"] for t in preview.tools]
    assert names[-1] == "request_tools"
    assert len(names) == 2 + 2 + 1
    assert preview.model_dump()["tokens"]["total"] == preview.tokens.total
