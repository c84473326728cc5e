"""SharePartitionManager.load: one read of a share-partition's durable state however many requests wait for it, and a
request cancelled meanwhile (its client disconnected) does not cancel the read the others wait for."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kbus.server.share.manager import ShareConfig, SharePartitionManager
from kbus.server.share.state import ShareState, ShareStateKey


class SlowPersister:
    def __init__(self) -> None:
        self.reads = 0
        self.release = asyncio.Event()

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareState | None:
        self.reads += 1
        await self.release.wait()
        return None

    async def write(self, key: ShareStateKey, state: ShareState) -> None:
        pass


def test_a_request_cancelled_while_loading_leaves_the_others_their_share_partition() -> None:
    async def scenario() -> None:
        manager = SharePartitionManager(ShareConfig())
        persister = manager.persister = SlowPersister()
        topic_id = uuid.uuid4()

        def load() -> asyncio.Task:
            return asyncio.create_task(manager.load("g", "t", topic_id, 0, 3, 0, 10))

        first, second = load(), load()
        await asyncio.sleep(0.01)
        first.cancel()  # the first request's client went away
        with pytest.raises(asyncio.CancelledError):
            await first
        persister.release.set()
        sp = await asyncio.wait_for(second, 5)  # before: CancelledError, and the request went unanswered
        assert sp is manager.partitions[("g", "t", 0)] and sp.leader_epoch == 3
        assert persister.reads == 1
        assert await manager.load("g", "t", topic_id, 0, 3, 0, 10) is sp  # loaded: no second read

    asyncio.run(scenario())
