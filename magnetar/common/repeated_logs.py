"""A logging filter that lets a message repeated many times through once per interval.

kazoo logs every connection attempt ("Connecting to ...", "Connection dropped: ... Connection
refused"), and a client whose ZooKeeper is down tries several times a second: an outage of an hour
would write tens of thousands of identical lines. The first of a message passes, then at most one
per ``interval_s``, saying how many like it were held back since the last one that passed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

#: messages remembered at most: a logger whose messages all differ forgets the oldest
REMEMBERED = 1024


class RepeatedMessages(logging.Filter):
    def __init__(self, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        #: message -> (when one last passed, how many were held back since)
        self._seen: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()  # kazoo logs from its connection thread

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        now = self._clock()
        with self._lock:
            passed, held = self._seen.pop(message, (None, 0))
            if passed is not None and now - passed < self.interval_s:
                self._seen[message] = (passed, held + 1)
                return False
            self._seen[message] = (now, 0)
            if len(self._seen) > REMEMBERED:
                del self._seen[next(iter(self._seen))]
        if held and passed is not None:
            record.msg, record.args = f"{message} ({held} more like it in the last {now - passed:.0f} s)", ()
        return True


def throttle(logger: logging.Logger, interval_s: float = 10.0) -> None:
    """Put a RepeatedMessages filter on ``logger``, once."""
    if not any(isinstance(f, RepeatedMessages) for f in logger.filters):
        logger.addFilter(RepeatedMessages(interval_s))
