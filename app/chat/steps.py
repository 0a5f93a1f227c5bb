"""What one loop step decides: run again, answer, or stop.

See docs/architecture.md, rule "phases return results".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from app.llm.types import ChatMessage


@dataclass(frozen=True, kw_only=True)
class RunAgain:
    pass


@dataclass(frozen=True, kw_only=True)
class FinalAnswer:
    content: str


@dataclass(frozen=True, kw_only=True)
class Stopped:
    status: Literal["max_iterations", "stopped", "cancelled"]
    reason: str | None = None
    escalated: bool = False


NextStep = RunAgain | FinalAnswer | Stopped


@dataclass(frozen=True, kw_only=True)
class PhaseResult:
    """What a tool phase produced, yielded last by `ToolPhase.run`: the observations to add
    to the conversation and the next step."""

    new_messages: list[ChatMessage]
    next_step: NextStep


class RunCancelled(Exception):
    """Raised inside the loop when the run's cancel flag is set."""
