"""Failed-authentication throttling per client address (API bearer keys, MCP endpoint, console
sign-in).

Keys are 256-bit, so guessing one is hopeless; the throttle keeps a client that sends wrong
keys from doing so at full speed, and never locks out a valid key: a request is always checked,
a valid key always passes (even from a throttled address); only a *failed* attempt from an
address with more than `limit` failures in the last `window_s` seconds answers 429 with
`Retry-After` instead of 401. Counts live in the process (each worker counts its own), for at
most `max_addresses` addresses (the oldest forgotten first).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque

from app.errors import RateLimited


class FailedAuthThrottle:
    def __init__(self, *, limit: int, window_s: float, max_addresses: int = 10_000) -> None:
        """`limit` 0 turns throttling off."""
        self.limit = limit
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def failed(self, address: str | None) -> RateLimited | None:
        """Record a failed attempt from `address`; the 429 to answer instead of the 401 when
        the address is over its limit, else None."""
        if self.limit <= 0 or not address:
            return None
        now = time.monotonic()
        times = self._failures.pop(address, None) or deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        times.append(now)
        while len(times) > self.limit + 1:  # only the newest limit + 1 matter
            times.popleft()
        self._failures[address] = times
        while len(self._failures) > self.max_addresses:
            self._failures.popitem(last=False)
        if len(times) <= self.limit:
            return None
        retry = max(1, math.ceil(times[0] + self.window_s - now))
        return RateLimited(
            f"too many failed authentication attempts from this address ({self.limit} in "
            f"{self.window_s:g} s); retry in {retry} s",
            retry_after=retry,
        )
