"""Assemble OpenAI `chat.completion.chunk` objects into text deltas and one `Completion`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.llm.types import ChatMessage, Completion, ToolCallRequest, Usage


class ChunkError(ValueError):
    """The provider sent something that is not a chat completion chunk."""

    def __init__(self, message: str, *, upstream: bool = False) -> None:
        super().__init__(message)
        self.upstream = upstream
        """True when the provider itself reported an error inside the stream."""


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class StreamAssembler:
    """Accumulates one streamed response; tool-call deltas are merged by their `index`."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, _CallParts] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None

    def feed(self, chunk: object) -> str:
        """Merge one decoded chunk; return the text it carried ("" when none)."""
        if not isinstance(chunk, dict):
            raise ChunkError(f"expected a JSON object chunk, got {type(chunk).__name__}")
        if chunk.get("error"):
            raise ChunkError(_error_message(chunk["error"]), upstream=True)
        if chunk.get("usage"):
            self.usage = Usage.from_openai(chunk["usage"])
        if self.model is None and isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ChunkError("'choices' is not a list")
        pieces = [self._feed_choice(choice) for choice in choices if _is_first(choice)]
        return "".join(pieces)

    def _feed_choice(self, choice: dict[str, Any]) -> str:
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            raise ChunkError("'delta' is not an object")
        for position, call in enumerate(delta.get("tool_calls") or []):
            self._feed_call(position, call)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            return content
        return ""

    def _feed_call(self, position: int, call: object) -> None:
        if not isinstance(call, dict):
            raise ChunkError("a tool call delta is not an object")
        index = call.get("index")
        parts = self.calls.setdefault(index if isinstance(index, int) else position, _CallParts())
        if call.get("id") and not parts.id:
            parts.id = str(call["id"])
        function = call.get("function") or {}
        if function.get("name") and not parts.name:
            parts.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            parts.arguments.append(arguments)

    def finish(self) -> Completion:
        """The assembled assistant turn; call once the stream has ended."""
        calls = [
            ToolCallRequest(id=p.id or f"call_{i}", name=p.name, arguments="".join(p.arguments))
            for i, p in sorted(self.calls.items())
        ]
        for call in calls:
            if not call.name:
                raise ChunkError(f"tool call {call.id!r} arrived without a function name")
        message = ChatMessage.assistant("".join(self.text) or None, calls or None)
        reason = self.finish_reason or ("tool_calls" if calls else "stop")
        return Completion(message=message, usage=self.usage, finish_reason=reason, model=self.model)


def completion_from_json(body: object) -> Completion:
    """Parse a non-streaming `chat.completion` response body."""
    if not isinstance(body, dict):
        raise ChunkError("response body is not a JSON object")
    if body.get("error"):
        raise ChunkError(_error_message(body["error"]), upstream=True)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ChunkError("response has no choices")
    raw = choices[0].get("message")
    if not isinstance(raw, dict):
        raise ChunkError("response choice has no message")
    try:
        message = ChatMessage.from_openai({**raw, "role": raw.get("role") or "assistant"})
    except ValueError as exc:
        raise ChunkError(str(exc)) from exc
    calls = message.tool_calls or []
    reason = choices[0].get("finish_reason") or ("tool_calls" if calls else "stop")
    model = body.get("model")
    return Completion(
        message=message,
        usage=Usage.from_openai(body.get("usage")),
        finish_reason=str(reason),
        model=model if isinstance(model, str) else None,
    )


def _is_first(choice: object) -> bool:
    return isinstance(choice, dict) and choice.get("index", 0) == 0


def _error_message(error: object) -> str:
    if isinstance(error, dict):
        return str(error.get("message") or error.get("type") or "unknown error")
    return str(error)


class SseDecoder:
    """Incremental text/event-stream decoder yielding each event's `data`, as the OpenAI SDK
    does: `data:` lines accumulate until a blank line; other fields and comments are ignored.
    Lines split on LF / CRLF only, so U+2028 inside JSON never breaks an event."""

    def __init__(self) -> None:
        self._pending: list[str] = []
        self._data: list[str] = []

    def feed(self, text: str) -> list[str]:
        """Consume one network read; return the data of every event it completed."""
        self._pending.append(text)
        if "\n" not in text:
            return []
        *lines, rest = "".join(self._pending).split("\n")
        self._pending = [rest] if rest else []
        events: list[str] = []
        for line in lines:
            self._line(line.removesuffix("\r"), events)
        return events

    def flush(self) -> list[str]:
        """End of body: an unterminated last line or event still counts."""
        events: list[str] = []
        tail = "".join(self._pending).removesuffix("\r")
        self._pending = []
        if tail:
            self._line(tail, events)
        self._line("", events)
        return events

    def _line(self, line: str, events: list[str]) -> None:
        if not line:
            if self._data:
                events.append("\n".join(self._data))
                self._data = []
        elif line.startswith("data:"):
            self._data.append(line[6:] if line.startswith("data: ") else line[5:])
