"""Storing a run as it starts: one protocol (`RunStartStore`), two implementations.

Before a run executes, its conversation (a new one, or an existing one the caller owns, of the
same agent, with no run in progress), the run itself and the user's message are stored, all or
nothing; the store answers with the conversation and the history before the message. An
implementation may defer that write (`Opened.deferred`): the run then executes at once and
stores itself with its first event (`Deferred.store`), so its first model call goes out while
the write runs; nothing of the run is sent or referenced before that write is done.

- `SessionRunStore` (`run_store_session.py`): one transaction on a SQLAlchemy session; it never
  defers. SQLite, and an app given a test's sessionmaker, use it.
- `PostgresRunStore` (`run_store_pg.py`): when the app owns its Postgres store. A new
  conversation's run is deferred and stored with its first event by one batched statement; a
  continued conversation is one statement too. What one statement cannot decide (a rate-limited
  key, whose count lives in the session's transaction; a client's history; why a continuation
  stored nothing) it hands to the session store it wraps, so each rule has one implementation.

`RunManager` is given one of them at start-up (`runtime.py` decides by store) and never asks
which. Both refuse alike: 404 for an agent or conversation that is gone or not the caller's,
400 for another agent's conversation, 409 while a run is in progress there, 429 past the key's
rate; a refused start stores nothing (`tests/chat/test_run_store_contract.py`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.errors import Conflict, NotFound
from app.llm.types import ChatMessage
from app.tenancy.principal import Principal

FirstEvent = tuple[str, dict[str, Any]]
"""A run's first journal event (seq 1: `run_started`, redacted): (kind, stored payload)."""


@dataclass(frozen=True, kw_only=True)
class RunStart:
    """A run to store before (or as) it executes."""

    run_id: uuid.UUID
    agent_id: uuid.UUID
    """An agent the caller may use (read from the agent cache; the store finds out whether it
    was deleted meanwhile)."""
    principal: Principal
    message: str
    conversation_id: uuid.UUID | None = None
    """None: a new conversation, titled with the message's start."""
    history: Sequence[ChatMessage] = ()
    """Earlier messages a stateless client sent (a new conversation only): stored first."""


class Deferred(Protocol):
    """A run not stored yet: it stores itself with its first event."""

    @property
    def crowded(self) -> bool:
        """Are other starts being written? Then the run's first model call waits until its
        first event is stored and sent (`RunDeps.stored_first`)."""
        ...

    def store(self, first: FirstEvent | None, stored: asyncio.Future[None]) -> asyncio.Future[None]:
        """Store the run with its first event (None: it ended before one). Returns the write;
        `stored` settles as it does (`NotFound` when the agent was deleted meanwhile)."""
        ...


@dataclass(frozen=True)
class Opened:
    conversation_id: uuid.UUID
    history: list[ChatMessage]
    """The conversation's messages before the user's (model messages), or the client's."""
    deferred: Deferred | None = None
    """Set when nothing is stored yet (see `Deferred`)."""


class RunStartStore(Protocol):
    async def open(self, start: RunStart) -> Opened:
        """Store the run, or defer it (`Opened.deferred`); raises `AppError`s only (404, 400,
        409, 429), having stored nothing."""
        ...

    async def aclose(self) -> None: ...


def agent_gone(agent_id: uuid.UUID) -> NotFound:
    """404 for the agent: unknown, not the key's, or deleted after it was read (a cached copy
    not yet dropped, or a concurrent delete)."""
    return NotFound(f"agent {str(agent_id)!r} not found")


def run_in_progress() -> Conflict:
    return Conflict(
        "a run is already in progress in this conversation; wait for it to "
        "finish or cancel it (POST /api/v1/runs/{run_id}/cancel)"
    )
