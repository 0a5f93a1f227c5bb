"""The Chat Completions request Quiver reads, and the response objects it writes.

Requests accept (and ignore) the many sampling fields clients send; what Quiver cannot honour
is refused in `messages.py` with OpenAI's 400, never silently dropped.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.kit.schemas import Flag

MAX_MESSAGES = 1000
MAX_TEXT = 200_000
"""The most characters of one message (as `POST /api/v1/chat`'s `message`)."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Lenient):
    type: str
    text: str | None = None


class MessageIn(_Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None


class StreamOptions(_Lenient):
    include_usage: Flag = False


class ChatCompletionRequest(_Lenient):
    model: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    """The agent's name."""
    messages: Annotated[list[MessageIn], Field(min_length=1, max_length=MAX_MESSAGES)]
    stream: Flag = False
    stream_options: StreamOptions | None = None
    user: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    """The end user of a frontend that shares one key (tenancy, as `user` on /api/v1/chat)."""
    n: int | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "quiver"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def chunk(
    completion_id: str,
    created: int,
    model: str,
    *,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One `chat.completion.chunk` (without `delta`: the usage chunk, no choices)."""
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [],
    }
    if delta is not None:
        body["choices"] = [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        ]
    if usage is not None:
        body["usage"] = usage
    return body


def completion(
    completion_id: str,
    created: int,
    model: str,
    *,
    content: str,
    finish_reason: str,
    usage: dict[str, int],
) -> dict[str, Any]:
    """A non-streamed `chat.completion`."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }
