"""Per-connector circuit breaker: closed → open after N consecutive failures → half-open.

Half-open lets exactly one trial call through after the cool-down; its outcome closes the
circuit or re-opens it for another cool-down. Only upstream trouble counts as a failure
(connect errors, timeouts, 5xx) — a 4xx is the caller's mistake, not the service's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(kw_only=True)
class CircuitBreaker:
    failure_threshold: int = 5
    cooldown_s: float = 30.0
    clock: Callable[[], float] = time.monotonic
    failures: int = 0
    opened_at: float | None = None
    _trial_in_flight: bool = field(default=False, repr=False)

    @property
    def state(self) -> BreakerState:
        if self.opened_at is None:
            return BreakerState.CLOSED
        if self.clock() - self.opened_at >= self.cooldown_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def retry_after(self) -> float:
        if self.opened_at is None:
            return 0.0
        return max(0.0, self.cooldown_s - (self.clock() - self.opened_at))

    def allow(self) -> bool:
        """Whether a call may go out now (claims the half-open trial slot)."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
            self._trial_in_flight = True
            return True
        return False

    def record_success(self) -> None:
        self.failures = 0
        self.opened_at = None
        self._trial_in_flight = False

    def record_failure(self) -> None:
        self.failures += 1
        if self._trial_in_flight or self.failures >= self.failure_threshold:
            self.opened_at = self.clock()
        self._trial_in_flight = False

    def release(self) -> None:
        """A call finished without telling us anything about upstream health."""
        self._trial_in_flight = False
