"""`call_agent`: its place in the pipeline, its stubs (capped and ranked), category, profile,
selection, and the handler's refusals before anything runs."""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

from app.agents.models import Agent
from app.pipeline.assemble import assemble_toolset
from app.pipeline.sources.backends import Backends
from app.tools.base import CallContext, ToolResult
from tests.fixtures.catalog import full_agent
from tests.fixtures.pipeline import ctx, make_agent, make_settings


def delegate(name: str, description: str = "") -> Agent:
    return Agent(
        id=uuid.uuid4(),
        name=name,
        description=description,
        instructions=f"secret instructions of {name}",
        connectors=[],
        databases=[],
        mcp_servers=[],
        skills=[],
        delegates=[],
    )


@dataclass
class RecordingDelegation:
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)

    async def delegate(self, delegate: Agent, task: str, ctx: CallContext) -> ToolResult:
        self.calls.append((delegate.name, task, ctx.run_id))
        return ToolResult.success(f"{delegate.name} did: {task}")


def hub(*delegates: Agent, **fields: object) -> Agent:
    agent = full_agent(**fields)  # type: ignore[arg-type]
    agent.delegates = list(delegates)
    return agent


async def test_call_agent_comes_after_the_mcp_step_with_stubs(backends: Backends) -> None:
    long = "Writes release notes from merged pull requests, grouped by label " * 3
    agent = hub(
        delegate("researcher", "Finds sources and summarises them."), delegate("scribe", long)
    )
    toolset = await assemble_toolset(agent, make_settings(), backends, "hello")
    names = [t.name for t in toolset.tools]
    assert names[names.index("mcp") + 1] == "call_agent"
    tool = toolset.full_tools()["call_agent"]
    assert tool.kind == "agent"
    assert tool.parameters["properties"]["agent"] == {
        "type": "string",
        "enum": ["researcher", "scribe"],
    }
    lines = tool.description.splitlines()
    assert lines[1:3] == ["Agents:", "- researcher: Finds sources and summarises them."]
    assert len(lines[3]) == 120
    assert lines[3].endswith("...")
    assert "secret instructions" not in tool.description
    assert "call_agent" not in toolset.system_prompt
    assert toolset.modes.as_dict().keys() == {"skill", "connector", "database", "mcp"}


async def test_no_delegates_no_tool(backends: Backends) -> None:
    toolset = await assemble_toolset(full_agent(), make_settings(), backends, "hello")
    assert "call_agent" not in toolset.full_tools()


async def test_many_delegates_are_capped_ranked_and_searchable(backends: Backends) -> None:
    rows = [delegate(f"clerk_{i:02d}", f"Files paperwork batch {i}.") for i in range(14)]
    rows.append(delegate("translator", "Translates documents between French and German."))
    agent = make_agent()
    agent.delegates = rows
    toolset = await assemble_toolset(agent, make_settings(), backends, "translate this to German")
    tool = toolset.full_tools()["call_agent"]
    lines = tool.description.splitlines()[2:]
    assert len(lines) == 5
    assert lines[0] == "- translator: Translates documents between French and German."
    assert lines[-1] == "… and 11 more: use call_agent with search"
    found = await toolset.call("call_agent", {"search": "paperwork batch 7"}, ctx())
    assert found.ok, found.error
    assert "- clerk_07: Files paperwork batch 7." in found.output


async def test_category_and_profile_apply(backends: Backends) -> None:
    helper = delegate("helper", "Helps.")
    only_agent = await assemble_toolset(
        hub(helper, tool_categories=["agent"]), make_settings(), backends, ""
    )
    assert [t.name for t in only_agent.tools] == ["call_agent"]
    without = await assemble_toolset(
        hub(helper, tool_categories=["builtin", "mcp"]), make_settings(), backends, ""
    )
    assert "call_agent" not in without.full_tools()
    excluded = await assemble_toolset(
        hub(helper, config={"tool_profile": {"exclude": ["call_*"]}}), make_settings(), backends, ""
    )
    assert "call_agent" not in excluded.full_tools()
    refused = await excluded.call("call_agent", {"agent": "helper", "task": "x"}, ctx())
    assert not refused.ok


async def test_selection_ranks_call_agent_like_any_tool(backends: Backends) -> None:
    agent = hub(
        delegate("helper", "Helps."),
        config={"tool_selection_threshold": 2, "tool_selection_max": 1},
    )
    toolset = await assemble_toolset(agent, make_settings(), backends, "query the sales database")
    assert toolset.selection is not None
    assert "call_agent" not in toolset.selection.active, "not pinned like the meta-tools"
    assert "database" in toolset.selection.active


async def test_the_handler_validates_before_delegating(backends: Backends) -> None:
    recording = RecordingDelegation()
    with_delegation = dataclasses.replace(backends, delegation=recording)
    agent = hub(delegate("helper", "Helps."))
    toolset = await assemble_toolset(agent, make_settings(), with_delegation, "")
    unknown = await toolset.call("call_agent", {"agent": "helpr", "task": "x"}, ctx())
    assert not unknown.ok
    assert "helper" in (unknown.error or "")
    no_task = await toolset.call("call_agent", {"agent": "helper"}, ctx())
    assert not no_task.ok
    assert "task" in (no_task.error or "")
    ok = await toolset.call("call_agent", {"agent": "helper", "task": "tidy up"}, ctx())
    assert ok.ok, ok.error
    assert ok.output == "helper did: tidy up"
    assert ok.step == "agent:helper"
    assert recording.calls == [("helper", "tidy up", "run-1")]

    cannot = await assemble_toolset(agent, make_settings(), backends, "")
    refused = await cannot.call("call_agent", {"agent": "helper", "task": "x"}, ctx())
    assert refused.error == "call_agent cannot run here: delegation needs a chat run"
