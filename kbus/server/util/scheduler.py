"""The broker's background work (Kafka's KafkaScheduler): periodic jobs and fire-and-forget tasks, all on the
event loop, with file-heavy jobs on worker threads. A failing job is logged and runs again next period."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine

log = logging.getLogger("kbus.server")


class Scheduler:
    def __init__(self) -> None:
        self._periodic: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()

    def schedule(self, name: str, interval_ms: int, job: Callable[[], None], *, in_thread: bool = False) -> None:
        """Run `job` every `interval_ms` (at least 100 ms), on a worker thread when `in_thread`."""
        every = self._every(name, max(interval_ms, 100) / 1000, job, in_thread)
        self._periodic.append(asyncio.create_task(every, name=name))

    def spawn(self, coro: Coroutine[object, None, None]) -> None:
        """Background work that must not be garbage-collected mid-flight; its failures are logged."""
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._done)

    async def stop(self) -> None:
        for t in self._periodic:
            t.cancel()
        for t in self._periodic:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._periodic.clear()
        for t in list(self._background):
            t.cancel()

    async def _every(self, name: str, interval_s: float, job: Callable[[], None], in_thread: bool) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                if in_thread:
                    await asyncio.to_thread(job)
                else:
                    job()
            except Exception:
                log.exception("periodic task %s failed", name)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("Background task failed: %s", task.exception())
