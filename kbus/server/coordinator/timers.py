"""Keyed deadlines on an injected clock (the coordinator's stand-in for Kafka's purgatories).

`schedule(key, deadline, fn)` replaces any timer under the same key, `run_due(now)` fires what is due. Nothing here
sleeps: `TimerDriver` runs the wheel on an asyncio loop for the broker, tests call `run_due` with a fake clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable

log = logging.getLogger("kbus.coordinator")


class _Timer:
    """A live timer: its deadline and callback are changed in place when it is moved on (a member's heartbeat, on
    every Heartbeat and OffsetCommit of a classic member), so moving one allocates nothing."""

    __slots__ = ("deadline", "fn", "seq")

    def __init__(self, deadline: int, seq: int, fn: Callable[[], None]) -> None:
        self.deadline = deadline
        self.seq = seq
        self.fn = fn


class Timers:
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._live: dict[Hashable, _Timer] = {}
        self._seq = itertools.count()
        self.on_change: Callable[[], None] | None = None

    def schedule(self, key: Hashable, deadline_ms: int, fn: Callable[[], None]) -> None:
        live = self._live.get(key)
        if live is not None and deadline_ms >= live.deadline:
            # a later deadline for a live timer (a member's heartbeat, every few seconds per member): its heap entry
            # stays, run_due moves it on when it comes up; no new entry and no wake-up of the driver
            live.deadline = deadline_ms
            live.fn = fn
            return
        seq = next(self._seq)
        self._live[key] = _Timer(deadline_ms, seq, fn)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if self.on_change is not None:
            self.on_change()

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def cancel_where(self, pred: Callable[[Hashable], bool]) -> None:
        for key in [k for k in self._live if pred(k)]:
            del self._live[key]

    def deadline(self, key: Hashable) -> int | None:
        entry = self._live.get(key)
        return None if entry is None else entry.deadline

    def next_deadline(self) -> int | None:
        """The earliest deadline, or earlier: a timer moved on (schedule) shows its old one until run_due passes it."""
        while self._heap:
            deadline, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live.seq == seq:
                return deadline
            heapq.heappop(self._heap)
        return None

    def run_due(self, now_ms: int) -> int:
        fired = 0
        while self._heap and self._heap[0][0] <= now_ms:
            _deadline, seq, key = heapq.heappop(self._heap)
            live = self._live.get(key)
            if live is None or live.seq != seq:
                continue
            if live.deadline > now_ms:  # moved on to a later deadline: its entry goes back in for that one
                heapq.heappush(self._heap, (live.deadline, seq, key))
                continue
            del self._live[key]
            fired += 1
            try:
                live.fn()
            except Exception:
                log.exception("coordinator timer %r failed", key)
        return fired

    def __len__(self) -> int:
        return len(self._live)


class TimerDriver:
    """Runs a Timers wheel on the event loop: sleeps until the next deadline or until a new timer is added."""

    def __init__(self, timers: Timers, clock_ms: Callable[[], int], max_sleep_ms: int = 1000) -> None:
        self._timers = timers
        self._clock = clock_ms
        self._max_sleep = max_sleep_ms
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._timers.on_change = self._wake.set
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kbus-group-timers")

    async def stop(self) -> None:
        self._timers.on_change = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            # Clear before running so a timer scheduled by a fired callback (or by a request) wakes us again.
            self._wake.clear()
            self._timers.run_due(self._clock())
            nxt = self._timers.next_deadline()
            wait_ms = self._max_sleep if nxt is None else max(0, min(self._max_sleep, nxt - self._clock()))
            if wait_ms > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait_ms / 1000)
            else:
                await asyncio.sleep(0)
