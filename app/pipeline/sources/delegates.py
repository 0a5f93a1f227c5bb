"""`call_agent(agent, task)`: delegate a sub-task to one of the agent's delegates (§12).

The description lists the delegates as `- name: description` stubs (120 chars); above 12
delegates only the 4 best ranked for the user's message are listed and `search` finds the
others. The delegate runs as a child run of the caller's run (`chat/delegation.py`); the
caller's model reads its final answer only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.agents.models import Agent
from app.pipeline.sources.backends import Backends
from app.pipeline.sources.disclosure import (
    Entry,
    EntryIndex,
    capped_sources,
    index_for,
    name_schema,
    search_text,
)
from app.tools.base import CallContext, ToolDef, ToolResult
from app.tools.function import FunctionTool, FunctionToolset, with_step
from app.tools.render import one_line
from app.tools.suggest import unknown_name
from app.tools.validation import invalid_arguments

NAME = "call_agent"
KIND = "agent"
DELEGATE_STUB_CHARS = 120
TIMEOUT_GRACE_S = 10.0
"""The phase's per-call timeout is a backstop only: the delegation times out first."""
INTRO = (
    "Delegate a task to another agent and get its final answer. The agent sees only `task`:"
    " make it self-contained. search: find agents by query."
)
_SEARCH_HINT = "Delegate with call_agent(agent=<name>, task=<task>)."


def delegate_stub(agent: Agent) -> str:
    """`- name: description`, one line, cut to 120 chars (117 + `...`)."""
    return one_line(f"- {agent.name}: {agent.description}", DELEGATE_STUB_CHARS)


def delegates_catalog(delegates: Sequence[Agent], query: str) -> str:
    """The stub lines; above 12 delegates the 4 best ranked for `query`, then the rest counted."""
    positions, rest = capped_sources(query, [Entry(a.name, a.description) for a in delegates])
    lines = [delegate_stub(delegates[i]) for i in positions]
    if rest:
        lines.append(f"… and {rest} more: use call_agent with search")
    return "\n".join(lines)


class CallAgent:
    def __init__(self, delegates: Sequence[Agent], backends: Backends | None, query: str) -> None:
        self._delegates = {a.name: a for a in delegates}
        self._backends = backends
        self._index: EntryIndex | None = None
        timeout = backends.settings.delegation_timeout_s if backends is not None else None
        self.tool = ToolDef(
            name=NAME,
            description=f"{INTRO}\nAgents:\n{delegates_catalog(delegates, query)}",
            parameters={
                "type": "object",
                "properties": {
                    "agent": name_schema(list(self._delegates), noun="agent", finder="search"),
                    "task": {"type": "string"},
                    "search": {"type": "string"},
                },
            },
            kind=KIND,
            target=KIND,
            timeout_s=None if timeout is None else timeout + TIMEOUT_GRACE_S,
        )

    def _search(self, query: str) -> ToolResult:
        if self._index is None:
            entries = [Entry(a.name, a.description) for a in self._delegates.values()]
            self._index = index_for(entries)
        text = search_text(query, self._index, noun="agents", hint=_SEARCH_HINT)
        return ToolResult.success(text, step="agent:search")

    async def __call__(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = str(args.get("agent") or "")
        query = args.get("search")
        if not name and isinstance(query, str) and query.strip():
            return self._search(query)
        task = args.get("task")
        if not name or not isinstance(task, str) or not task.strip():
            return ToolResult.fail(invalid_arguments(NAME, "pass agent and task (or search)"))
        delegate = self._delegates.get(name)
        if delegate is None:
            return ToolResult.fail(unknown_name("agent", name, list(self._delegates)))
        if self._backends is None or self._backends.delegation is None:
            return ToolResult.fail("call_agent cannot run here: delegation needs a chat run")
        result = await self._backends.delegation.delegate(delegate, task, ctx)
        return with_step(result, f"agent:{name}")


def call_agent_toolset(
    delegates: Sequence[Agent], backends: Backends | None, query: str
) -> FunctionToolset:
    tool = CallAgent(delegates, backends, query)
    return FunctionToolset([FunctionTool(tool=tool.tool, handler=tool)], label="delegates")
