"""The tool abstraction every source implements.

A *source* (skills, connectors, databases, MCP servers, built-ins, meta-tools) exposes
`list_tools()` and `call_tool()`. Cross-cutting behaviour (profiles, prefixes, caps,
selection) wraps a source instead of branching inside it. Tool failures are values:
`ToolResult.fail(...)`, never exceptions that reach the loop.

See docs/architecture.md, rule "compose, do not branch".
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from app.events import RunEvent

JsonSchema = dict[str, Any]


class SearchHints(NamedTuple):
    """What a tool's ranker may index besides its name, description and parameters; never
    sent to the model. A connector action gives its method, path and OpenAPI tags; a tool
    from a source (connector, MCP server) gives the source's name and description.

    A named tuple: rankers are cached by their tools' content, and tuples hash in C."""

    source: str = ""
    source_description: str = ""
    method: str = ""
    path: str = ""
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ToolDef:
    """A tool exactly as the model receives it (OpenAI function-calling shape)."""

    name: str
    description: str
    parameters: JsonSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    kind: str = "builtin"
    """Resource kind: builtin | skill | connector | database | mcp | meta."""
    target: str = ""
    """Progress-tracker step id prefix, e.g. `connector:jira/create_issue`."""
    timeout_s: float | None = None
    """Overrides the run's per-call timeout (a delegation runs a whole child run)."""
    hints: SearchHints | None = None
    """Extra words for the tool rankers (pipeline/ranker.py); not part of `to_openai`."""

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, kw_only=True)
class ToolResult:
    """What the model sees after a tool call. `output` is always a string for the model."""

    ok: bool
    output: str = ""
    error: str | None = None
    retryable: bool = False
    step: str | None = None
    """Step id for the progress tracker (e.g. `mcp:github/search`); defaults to the tool name."""
    loaded_tools: tuple[str, ...] = ()
    """Names `request_tools` added to the active set."""
    approval: str | None = None
    """Set when the call did nothing because it needs a person's approval: why."""

    @classmethod
    def success(cls, output: str, *, step: str | None = None) -> ToolResult:
        return cls(ok=True, output=output, step=step)

    @classmethod
    def fail(cls, error: str, *, retryable: bool = False, step: str | None = None) -> ToolResult:
        return cls(ok=False, error=error, retryable=retryable, step=step)

    @classmethod
    def needs_approval(cls, reason: str, *, step: str | None = None) -> ToolResult:
        """Nothing ran: the call waits for a person (the chat loop asks, then calls again
        with `CallContext.approved`). Callers that cannot ask see a plain failure."""
        return cls(
            ok=False,
            error=f"{reason}; it needs a person's approval, which cannot be asked for here",
            step=step,
            approval=reason,
        )

    @property
    def text(self) -> str:
        """The observation the model reads."""
        return self.output if self.ok else f"Error: {self.error}"


@dataclass(kw_only=True)
class CallContext:
    """Per-call context handed to sources; extended by the run (ids for audit rows)."""

    run_id: str | None = None
    agent_id: str | None = None
    api_key_id: str | None = None
    user: str | None = None
    approved: bool = False
    """A person approved this very call: an executor that asks for approval runs it."""
    emit: Callable[[RunEvent], None] | None = field(default=None, repr=False, compare=False)
    """Reports events of the call into its run's stream (a delegation's start and end);
    none outside a run's tool phase."""


class Toolset(abc.ABC):
    """A source of tools."""

    @abc.abstractmethod
    def list_tools(self) -> Mapping[str, ToolDef]: ...

    @abc.abstractmethod
    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult: ...

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release resources; most sources hold none."""
