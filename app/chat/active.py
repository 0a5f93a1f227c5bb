"""A run while it executes in this process: its cancel flag, live subscribers and task; the
final events of runs that could not finish; stored messages turned back into model messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from app.chat.models import Message
from app.events import ErrorInfo, RunEvent, RunFailed
from app.llm.types import ChatMessage, Role, ToolCallRequest

Published = tuple[int, RunEvent] | None
"""An event for live subscribers (None: the stream ends without a stored final event)."""
Submitted = tuple[int, RunEvent, "asyncio.Future[None]"]


@dataclass(eq=False)
class ActiveRun:
    run_id: uuid.UUID
    conversation_id: uuid.UUID
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    subscribers: list[asyncio.Queue[Published]] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    journal_failed: bool = False
    first_out: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the live stream that started the run has sent its first event (or ended
    without it): in a burst of starts the run's first model call waits for it."""

    def subscribe(self) -> asyncio.Queue[Published]:
        queue: asyncio.Queue[Published] = asyncio.Queue()
        self.subscribers.append(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Published]) -> None:
        with contextlib.suppress(ValueError):
            self.subscribers.remove(queue)

    def publish(self, item: Published) -> None:
        for queue in self.subscribers:
            queue.put_nowait(item)


def journal_unavailable() -> RunFailed:
    return RunFailed(
        error=ErrorInfo(
            code="journal_unavailable",
            message="the run's events could not be stored; the run was stopped",
        )
    )


def lost_event() -> RunFailed:
    return RunFailed(
        error=ErrorInfo(
            code="run_lost", message="the process running this run stopped before it finished"
        )
    )


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A conversation's message as the Postgres run store reads it (the columns `Message` has)."""

    seq: int
    role: str
    content: str | None
    tool_calls: list[dict[str, Any]] | None
    tool_call_id: str | None
    name: str | None


def history_from_rows(rows: Sequence[Message | StoredMessage]) -> list[ChatMessage]:
    """Stored messages → model messages, dropping tool calls that never got a result."""
    answered = {row.tool_call_id for row in rows if row.role == "tool"}
    out: list[ChatMessage] = []
    for row in rows:
        calls = [ToolCallRequest.from_openai(c) for c in row.tool_calls or []]
        calls = [c for c in calls if c.id in answered]
        if row.role == "assistant" and not calls and not row.content:
            continue
        out.append(
            ChatMessage(
                role=cast(Role, row.role),
                content=row.content,
                tool_calls=calls or None,
                tool_call_id=row.tool_call_id,
                name=row.name,
            )
        )
    return out


def message_row(message: ChatMessage) -> dict[str, Any]:
    return {
        "role": message.role,
        "content": message.content,
        "tool_calls": [c.to_openai() for c in message.tool_calls] if message.tool_calls else None,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
    }


RESUMABLE_KINDS = frozenset({"mcp_session"})
"""Runs another worker can take over (sessions of the MCP endpoint): never closed as lost."""
