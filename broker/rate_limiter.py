"""A topic's publish or dispatch rate limit (Pulsar's publishRate and dispatchRate policies).

Fixed windows of ``period_s``: once a window's messages or bytes are used up, the caller waits
for the next window (a producer's connection stops being read, a dispatcher stops reading), as
Pulsar's throttling does. One object per topic and kind, reconfigured in place when the policy
changes, so everything holding it sees the new limits.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.messages = 0  # per window; 0: no limit
        self.bytes = 0
        self.period_s = 1.0
        self._window_end = 0.0
        self._messages_used = 0
        self._bytes_used = 0

    def configure(self, messages: int, size: int, period_s: float = 1.0) -> None:
        """New limits (a value at or below 0: no limit of that kind), from the next window on."""
        self.messages, self.bytes, self.period_s = max(0, messages), max(0, size), period_s

    @property
    def limited(self) -> bool:
        return self.messages > 0 or self.bytes > 0

    def _roll(self) -> float:
        now = self._clock()
        if now >= self._window_end:
            self._window_end = now + self.period_s
            self._messages_used = self._bytes_used = 0
        return now

    def consume(self, messages: int, size: int) -> None:
        if self.limited:
            self._roll()
            self._messages_used += messages
            self._bytes_used += size

    def wait_s(self) -> float:
        """0 while the window has room left; else the seconds until the next window."""
        if not self.limited:
            return 0.0
        now = self._roll()
        used_up = (self.messages and self._messages_used >= self.messages) or (
            self.bytes and self._bytes_used >= self.bytes
        )
        return self._window_end - now if used_up else 0.0

    def messages_left(self) -> int | None:
        """Messages the window still takes (None: no message limit)."""
        if not self.messages:
            return None
        self._roll()
        return max(0, self.messages - self._messages_used)
