"""Wire-neutral chat types for the OpenAI-compatible client (docs/contract.md §5).

`LlmClient.stream_chat()` yields zero or more `TextDelta` items followed by exactly one
`Completion`; the `Completion.message` is the assistant turn to append to the conversation.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One native tool call requested by the model."""

    id: str
    name: str
    arguments: str
    """The raw JSON text exactly as the model sent it (may be malformed)."""

    def parse_arguments(self) -> dict[str, Any]:
        """Decode `arguments` into an object; `ValueError` says why it is not one."""
        text = self.arguments.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"tool call {self.name!r} ({self.id!r}) has malformed JSON arguments: "
                f"{exc.msg} at position {exc.pos}"
            ) from exc
        if not isinstance(value, dict):
            raise ValueError(
                f"tool call {self.name!r} ({self.id!r}) arguments must be a JSON object, "
                f"got {type(value).__name__}"
            )
        return value

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ToolCallRequest:
        function = data.get("function") or {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        return cls(
            id=str(data.get("id") or ""), name=str(function.get("name") or ""), arguments=arguments
        )


@dataclass(slots=True)
class ChatMessage:
    """One conversation message in OpenAI Chat Completions shape."""

    role: Role
    content: str | None = None
    tool_calls: list[ToolCallRequest] | None = None
    """Assistant messages only: the native tool calls of that turn."""
    tool_call_id: str | None = None
    """Tool messages only: the id of the call this message answers."""
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(
        cls, content: str | None, tool_calls: list[ToolCallRequest] | None = None
    ) -> ChatMessage:
        return cls(role="assistant", content=content, tool_calls=tool_calls or None)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, *, name: str | None = None) -> ChatMessage:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name)

    def to_openai(self) -> dict[str, Any]:
        """The request-body form; `content` is kept (as null) on assistant tool-call turns."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> ChatMessage:
        role = data.get("role")
        if role not in _ROLES:
            raise ValueError(f"unknown message role {role!r}")
        content = data.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        raw_calls = data.get("tool_calls") or None
        return cls(
            role=role,
            content=content if content is None else str(content),
            tool_calls=[ToolCallRequest.from_openai(c) for c in raw_calls] if raw_calls else None,
            tool_call_id=data.get("tool_call_id"),
            name=data.get("name"),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token accounting as reported by the provider (zeros when it reported none)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, int]) -> Usage:
        """The inverse of `to_dict` (missing counts are zero)."""
        return cls(
            prompt_tokens=data.get("prompt_tokens", 0),
            completion_tokens=data.get("completion_tokens", 0),
            total_tokens=data.get("total_tokens", 0),
        )

    @classmethod
    def from_openai(cls, data: dict[str, Any] | None) -> Usage:
        if not data:
            return cls()
        prompt = _int(data.get("prompt_tokens"))
        completion = _int(data.get("completion_tokens"))
        total = _int(data.get("total_tokens")) or prompt + completion
        return cls(prompt_tokens=prompt, completion_tokens=completion, total_tokens=total)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, yielded as soon as it arrives."""

    text: str


@dataclass(frozen=True, slots=True)
class Completion:
    """The end of one model call: the assembled assistant message, usage and finish reason."""

    message: ChatMessage
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = "stop"
    """`stop`, `tool_calls`, `length`, `content_filter`, ... as the provider said."""
    model: str | None = None
    """The model that answered, as the provider named it (`model` of its chunks or body)."""

    @property
    def tool_calls(self) -> list[ToolCallRequest]:
        return list(self.message.tool_calls or [])

    @property
    def text(self) -> str:
        return self.message.content or ""
