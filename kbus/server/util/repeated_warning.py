"""One log line for a failure that repeats: the first occurrence, then at most one summary per interval, and
one line when it stops. A follower retrying a dead leader every 0.5 s would otherwise fill the log during a
failover (Kafka's fetcher also logs its connection failures once per backoff, not per attempt)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RepeatedWarning:
    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        level: int = logging.INFO,
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self._level = level
        self._failures = 0  # since the last success
        self._unreported = 0  # since the last line written
        self._last_line = 0.0

    def failed(self, message: str) -> None:
        """A failure: logged when it is the first since a success, or the interval has passed."""
        now = self._clock()
        self._failures += 1
        self._unreported += 1
        if self._failures == 1:
            self._log.log(self._level, "%s", message)
        elif now - self._last_line >= self._interval:
            self._log.log(self._level, "%s (%d times since the last report)", message, self._unreported)
        else:
            return
        self._unreported = 0
        self._last_line = now

    def succeeded(self, message: str) -> None:
        """Back to normal: one line if there were failures, saying how many."""
        if self._failures:
            self._log.log(self._level, "%s after %d failed attempt(s)", message, self._failures)
        self._failures = 0
        self._unreported = 0
