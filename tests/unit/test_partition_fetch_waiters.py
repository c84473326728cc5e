"""Parked Fetch requests wake on what can complete them (Kafka's DelayedFetch): a follower's on the next append
(it reads to the log end), a consumer's on the next high-watermark advance (it reads no further), so an append the
ISR does not have yet wakes no consumer, and the follower fetch that moves the high watermark wakes no follower."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kbus.common.topic_config import LogConfig
from kbus.protocol.record_batch import build_batch
from kbus.server.log.log import Log
from kbus.server.metadata.types import PartitionState
from kbus.server.partition.partition import Partition

LEADER, F1, F2 = 1, 2, 3


def partition(tmp_path: Path, replicas: list[int]) -> Partition:
    log = Log.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, log, PartitionState(LEADER, 0, replicas, replicas), LEADER)


def test_replicated_consumers_wake_on_the_high_watermark_and_followers_on_appends(tmp_path: Path) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        part = partition(tmp_path, [LEADER, F1, F2])
        consumer, follower1, follower2 = loop.create_future(), loop.create_future(), loop.create_future()
        part.add_waiter(consumer, log_end=False)
        part.add_waiter(follower1, log_end=True)
        part.add_waiter(follower2, log_end=True)
        part.append_as_leader(build_batch([(None, b"x")]))
        assert follower1.done() and follower2.done()
        assert not consumer.done() and part.high_watermark == 0  # nothing a consumer may read yet
        follower2 = loop.create_future()
        part.add_waiter(follower2, log_end=True)
        part.follower_fetched(F1, 1)
        assert not consumer.done()  # F2 does not have it yet
        part.follower_fetched(F2, 1)
        assert part.high_watermark == 1 and consumer.done()
        assert not follower2.done()  # the high watermark gives a follower nothing to fetch
        part.remove_waiter(follower2)
        part.append_as_leader(build_batch([(None, b"y")]))
        assert not follower2.done()  # removed: no longer parked

    asyncio.run(main())


def test_a_sole_replica_wakes_consumers_on_the_append(tmp_path: Path) -> None:
    async def main() -> None:
        part = partition(tmp_path, [LEADER])
        consumer = asyncio.get_running_loop().create_future()
        part.add_waiter(consumer, log_end=False)
        part.append_as_leader(build_batch([(None, b"x")]))
        assert part.high_watermark == 1 and consumer.done()

    asyncio.run(main())


def test_losing_leadership_wakes_every_parked_fetch(tmp_path: Path) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        part = partition(tmp_path, [LEADER, F1])
        consumer, follower = loop.create_future(), loop.create_future()
        part.add_waiter(consumer, log_end=False)
        part.add_waiter(follower, log_end=True)
        part.update_state(PartitionState(F1, 1, [LEADER, F1], [F1]))
        assert consumer.done() and follower.done()  # they answer NOT_LEADER_OR_FOLLOWER on their next pass

    asyncio.run(main())
