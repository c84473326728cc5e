"""kbus.server.util.eager: a handler that does not wait runs to its end on the caller's stack; one that waits goes on as
a Task that behaves as if it had been one from the start (results, exceptions, cancellation, sleep(0))."""

from __future__ import annotations

import asyncio

import pytest

from kbus.server.util import eager


def test_a_coroutine_that_never_waits_finishes_on_the_spot() -> None:
    ran: list[str] = []

    async def handler() -> None:
        ran.append("done")

    async def main() -> None:
        assert eager.start(handler()) is None
        assert ran == ["done"]  # before this function awaited anything

    asyncio.run(main())


def test_a_waiting_coroutine_continues_as_a_task() -> None:
    events: list[object] = []

    async def handler(fut: asyncio.Future[int]) -> None:
        events.append("started")
        events.append(await fut)
        await asyncio.sleep(0)  # a bare yield (None) passes through too
        events.append(await asyncio.wait_for(asyncio.sleep(0.01, "slept"), 5))

    async def main() -> None:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = eager.start(handler(fut))
        assert task is not None and events == ["started"]
        fut.set_result(42)
        await task
        assert events == ["started", 42, "slept"]

    asyncio.run(main())


def test_errors_before_and_after_the_first_wait() -> None:
    async def early() -> None:
        raise ValueError("at once")

    async def late(fut: asyncio.Future[None]) -> None:
        await fut
        raise KeyError("later")

    async def main() -> None:
        with pytest.raises(ValueError):
            eager.start(early())
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        task = eager.start(late(fut))
        assert task is not None
        fut.set_result(None)
        with pytest.raises(KeyError):
            await task

    asyncio.run(main())


def test_cancelling_the_task_cancels_the_coroutine() -> None:
    cleanup: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cleanup.append("finally")

    async def main() -> None:
        task = eager.start(handler())
        assert task is not None
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert cleanup == ["finally"] and task.cancelled()

    asyncio.run(main())
