"""Wall-clock milliseconds since the epoch, Kafka's unit for timestamps, retention, sessions and quota windows."""

from __future__ import annotations

import time


def now_ms() -> int:
    return time.time_ns() // 1_000_000
