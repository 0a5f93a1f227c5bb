"""What one loop step decides: run again, answer, or stop.

See docs/architecture.md, rule "phases return results".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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


class RunCancelled(Exception):
    """Raised inside the loop when the run's cancel flag is set."""
