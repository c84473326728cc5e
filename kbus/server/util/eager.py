"""Start a request's handler at once, on the caller's stack, and make it a Task only if it has to wait.

Most requests never wait: a Metadata, an ApiVersions, a one-replica acks=all Produce, a Fetch with data ready.
As a Task each one cost the loop a Task object, a done callback and an extra turn of the event loop before it
even started (Python 3.12's eager task factory does what this does; the broker runs on 3.11). `start()` runs the
coroutine to its first suspension; if it finished, that was all. If it suspended on a future, a Task takes over
from there, driving the same coroutine, so cancellation and the rest of its life are a Task's as usual.

What runs before the first suspension sees no current task (`asyncio.current_task()` is None): handlers must not
use `asyncio.timeout()` before their first await (kbus's use `asyncio.wait_for`, which is fine).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator


class _Resume:
    """An awaitable that continues a coroutine suspended (outside any Task) on `first`, the value it yielded."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[object, None, None], first: object) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[object, None, None]:
        coro, value = self.coro, self.first
        while True:
            try:
                received = yield value  # the Task waits on it (a future), then resumes us
            except BaseException as exc:  # cancelled (or thrown into) while suspended: pass it on
                try:
                    value = coro.throw(exc)
                except StopIteration:
                    return
            else:
                try:
                    value = coro.send(received)
                except StopIteration:
                    return


async def _resume(coro: Coroutine[object, None, None], first: object) -> None:
    await _Resume(coro, first)


def resume(coro: Coroutine[object, None, None], first: object, name: str | None = None) -> asyncio.Task[None]:
    """The Task that carries on with `coro`, which suspended (outside any Task) on `first` (what start() does
    after its first step; kbus.server.network.processor takes that step itself, in compiled code)."""
    return asyncio.get_running_loop().create_task(_resume(coro, first), name=name)


def start(coro: Coroutine[object, None, None], name: str | None = None) -> asyncio.Task[None] | None:
    """Run `coro` until it finishes (None) or first waits (the Task that carries on with it). Its exceptions
    propagate here when raised before it waits, as they would from the Task later."""
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return resume(coro, first, name)
