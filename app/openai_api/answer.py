"""A run's events → Chat Completions: chunks for a stream, one `chat.completion` otherwise.

The client sees the answer: the model's text. Tool calls, results and the run's other events
stay in Quiver (journal, `/runs/{id}/events`); a pending approval shows as the SSE comment
`: waiting for approval`, repeated while idle, so the stream stays open. A run that fails
ends with OpenAI's error shape (in the stream: a `data: {"error": …}` event, as OpenAI sends
one mid-stream).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from app.chat.sse import PING
from app.chat.streams import LiveItem
from app.errors import openai_error
from app.events import (
    ApprovalRequested,
    ApprovalResolved,
    ErrorInfo,
    MessageEvent,
    ModelDelta,
    RunFailed,
    RunFinished,
    ToolCallEvent,
)
from app.openai_api.schemas import chunk, completion

WAITING = b": waiting for approval\n\n"
DONE = b"data: [DONE]\n\n"
FINISH_REASONS = {
    "completed": "stop",
    "max_iterations": "length",
    "stopped": "stop",
    "cancelled": "stop",
}
"""`run_finished.status` → `finish_reason` (`length`: the run hit its iteration limit)."""
_NOT_STORED = ErrorInfo(
    code="journal_unavailable",
    message="the run's final event could not be stored; replay it later with X-Run-Id",
)


@dataclass(frozen=True, kw_only=True)
class Meta:
    """What every chunk of one completion repeats."""

    completion_id: str
    created: int
    model: str


def failure(error: ErrorInfo) -> tuple[int, dict[str, Any]]:
    """A `run_failed` → (HTTP status, OpenAI error body); the run's code is the `code`."""
    code = error.code
    status = 500
    if code == "llm_timeout":
        status = 504
    elif code in ("llm_http_429", "journal_unavailable", "run_lost"):
        status = 503
    elif code.startswith("llm_"):
        status = 502
    status, body = openai_error(status, error.message, code=code)
    body["error"]["type"] = "server_error"
    return status, body


def _data(body: dict[str, Any]) -> bytes:
    return (
        b"data: " + json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"
    )


async def stream_chunks(
    items: AsyncIterator[LiveItem], meta: Meta, *, include_usage: bool
) -> AsyncIterator[bytes]:
    """SSE `data:` lines in OpenAI's streaming format, ending with `data: [DONE]`."""

    def part(delta: dict[str, Any] | None = None, **extra: Any) -> bytes:
        return _data(chunk(meta.completion_id, meta.created, meta.model, delta=delta, **extra))

    yield part({"role": "assistant", "content": ""})
    waiting = 0
    wrote = False  # any text sent yet
    turn_text = False  # text sent since the last tool call
    after_tools = False
    async for item in items:
        if item is None:
            yield WAITING if waiting else PING
            continue
        event = item[1]
        if isinstance(event, ModelDelta):
            text = event.text
            if after_tools and wrote and not turn_text:
                text = "\n\n" + text  # the model's text of a later turn starts a paragraph
            wrote = turn_text = True
            yield part({"content": text})
        elif isinstance(event, ToolCallEvent):
            turn_text, after_tools = False, True
        elif isinstance(event, ApprovalRequested):
            waiting += 1
            yield WAITING
        elif isinstance(event, ApprovalResolved):
            waiting = max(0, waiting - 1)
        elif isinstance(event, MessageEvent):
            if event.content and not turn_text:  # an answer that came without deltas
                wrote = turn_text = True
                yield part({"content": event.content})
        elif isinstance(event, RunFinished):
            yield part({}, finish_reason=FINISH_REASONS.get(event.status, "stop"))
            if include_usage:
                yield part(None, usage=event.usage)
            yield DONE
            return
        elif isinstance(event, RunFailed):
            yield _data(failure(event.error)[1])
            return
    yield _data(failure(_NOT_STORED)[1])


@dataclass(frozen=True)
class Outcome:
    """How a run ended for a non-streamed request: the completion, or an error."""

    status: int
    body: dict[str, Any]


async def collect(items: AsyncIterator[LiveItem], meta: Meta) -> Outcome:
    """Wait for the run's end: its `message` is the completion's content."""
    content = ""
    async for item in items:
        if item is None:
            continue
        event = item[1]
        if isinstance(event, MessageEvent):
            content = event.content
        elif isinstance(event, RunFinished):
            body = completion(
                meta.completion_id,
                meta.created,
                meta.model,
                content=content,
                finish_reason=FINISH_REASONS.get(event.status, "stop"),
                usage=event.usage,
            )
            return Outcome(200, body)
        elif isinstance(event, RunFailed):
            return Outcome(*failure(event.error))
    return Outcome(*failure(_NOT_STORED))
