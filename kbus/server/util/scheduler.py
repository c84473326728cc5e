"""The broker's periodic jobs (Kafka's KafkaScheduler), on the event loop, file-heavy ones on worker threads. A
failing job is logged and runs again next period."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

log = logging.getLogger("kbus.server")


class Scheduler:
    def __init__(self) -> None:
        self._periodic: list[asyncio.Task[None]] = []

    def schedule(self, name: str, interval_ms: int, job: Callable[[], None], *, in_thread: bool = False) -> None:
        """Run `job` every `interval_ms` (at least 100 ms), on a worker thread when `in_thread`."""
        every = self._every(name, max(interval_ms, 100) / 1000, job, in_thread)
        self._periodic.append(asyncio.create_task(every, name=name))

    async def stop(self) -> None:
        """No periodic job runs again, and none is still running when this returns: a pass already on its worker
        thread is waited for (Kafka's KafkaScheduler.shutdown awaits its executor's running tasks). The broker
        writes its final checkpoints and closes the logs after this: a pass still running then could write older
        high watermarks over the final ones, or delete segments of a log being closed."""
        for t in self._periodic:
            t.cancel()
        for t in self._periodic:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._periodic.clear()

    @staticmethod
    async def _every(name: str, interval_s: float, job: Callable[[], None], in_thread: bool) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if not in_thread:
                _run(name, job)
                continue
            # A thread cannot be interrupted: a cancellation (stop()) while the pass runs waits for the pass to
            # end before it goes on (the shield keeps the cancellation from leaving the pass running unawaited)
            running = asyncio.ensure_future(asyncio.to_thread(_run, name, job))
            try:
                await asyncio.shield(running)
            except asyncio.CancelledError:
                await asyncio.wait([running])
                raise


def _run(name: str, job: Callable[[], None]) -> None:
    """One pass of a periodic job; a failure is logged and the job runs again next period."""
    try:
        job()
    except Exception:
        log.exception("periodic task %s failed", name)
