"""The broker's Scheduler (Kafka's KafkaScheduler): periodic jobs on the loop or on worker threads. stop() returns
only once no pass is running: the broker writes its final checkpoints and closes its logs after it."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from kbus.server.util.scheduler import Scheduler


def test_stop_waits_for_a_pass_running_on_its_worker_thread() -> None:
    """A thread cannot be interrupted: stop() used to cancel the task awaiting the pass and return at once, leaving
    the pass running behind it (the high-watermark checkpoint then wrote older offsets after the final one)."""
    entered, release = threading.Event(), threading.Event()
    events: list[str] = []

    def job() -> None:
        entered.set()
        release.wait(10)
        events.append("pass ended")

    async def main() -> None:
        jobs = Scheduler()
        jobs.schedule("held", 100, job, in_thread=True)
        assert await asyncio.to_thread(entered.wait, 10)  # the pass is running on its worker thread
        stopping = asyncio.ensure_future(jobs.stop())
        try:
            done, _ = await asyncio.wait([stopping], timeout=0.1)
            assert not done, "stop() returned while a pass was still running"
        finally:
            release.set()
        await stopping
        events.append("stopped")

    asyncio.run(main())
    assert events == ["pass ended", "stopped"]


def test_no_pass_starts_after_stop() -> None:
    passes: list[str] = []

    async def main() -> None:
        jobs = Scheduler()
        jobs.schedule("thread", 100, lambda: passes.append("thread"), in_thread=True)
        jobs.schedule("loop", 100, lambda: passes.append("loop"))
        while not {"thread", "loop"} <= set(passes):
            await asyncio.sleep(0.02)
        await jobs.stop()
        count = len(passes)
        await asyncio.sleep(0.3)  # three periods
        assert len(passes) == count

    asyncio.run(main())


def test_a_failing_pass_is_logged_and_the_job_runs_again(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[int] = []

    def job() -> None:
        calls.append(1)
        raise OSError("disk on fire")

    async def main() -> None:
        jobs = Scheduler()
        jobs.schedule("failing", 100, job, in_thread=True)
        while len(calls) < 2:
            await asyncio.sleep(0.02)
        await jobs.stop()

    with caplog.at_level(logging.ERROR, logger="kbus.server"):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records].count("periodic task failing failed") >= 2
