"""StateCoordinator, the ownership half the group and transaction coordinators share: a partition of the state
topic is NOT_COORDINATOR until elected, COORDINATOR_LOAD_IN_PROGRESS while its load runs, NONE once loaded, and
NOT_COORDINATOR again after resignation."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.state_topic import (
    BackgroundTasks,
    InternalTopicLog,
    StateCoordinator,
    StatePartitions,
    StateReplicas,
    StateWriteError,
)
from kbus.server.log.log import AppendResult
from kbus.server.partition.partition import Partition
from tests.unit.test_api_handlers import fake_partition


class GatedLog:
    """A state log whose reads wait until the test opens the gate, so the load can be seen in flight."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def append(self, partition: int, records: bytes) -> int:
        return 0

    async def read(self, partition: int) -> list[bytes]:
        await self.gate.wait()
        return [b"state"]


class Coordinator(StateCoordinator[list[bytes]]):
    def __init__(self, log: GatedLog) -> None:
        self.tasks = BackgroundTasks("test")
        self.installed: dict[int, list[bytes]] = {}
        self.partitions = StatePartitions(
            "__test_state", log, lambda _p, chunks: chunks, self.installed.__setitem__,
            lambda p: self.installed.pop(p, None), self.tasks.spawn,
        )  # fmt: skip


def test_a_partition_is_not_coordinated_then_loading_then_owned_then_not_after_resignation() -> None:
    async def run() -> None:
        log = GatedLog()
        c = Coordinator(log)
        assert c.ownership_error(0) == E.not_coordinator and not c.coordinates(0)
        c.on_election(0)
        assert c.ownership_error(0) == E.coordinator_load_in_progress and c.coordinates(0)
        assert c.ownership_error(1) == E.not_coordinator
        log.gate.set()
        await c.tasks.settle()
        assert c.ownership_error(0) == E.none and c.installed == {0: [b"state"]} and c.owned == {0}
        c.on_resignation(0)
        assert c.ownership_error(0) == E.not_coordinator and c.installed == {} and not c.loading

    asyncio.run(run())


class _Replicas:
    """What InternalTopicLog asks of the replica manager; `committed` answers acks_satisfied. The partition is a real
    one (the append is compiled: it checks the types it is handed), never appended to."""

    def __init__(self, committed: bool) -> None:
        self.committed = committed
        self.waits = 0
        self.from_coordinator = False
        self.acks: list[int] = []

    def leader_partition(self, topic: str, index: int) -> tuple[Partition, E]:
        return fake_partition(topic, index), E.none

    def append_records(
        self, part: Partition, records: bytes, acks: int, *, from_coordinator: bool = False
    ) -> AppendResult:
        self.from_coordinator = from_coordinator
        self.acks.append(acks)
        return AppendResult(7, 7, -1, 0)

    def acks_satisfied(self, part: Partition, result: AppendResult, acks: int) -> bool:
        self.acks.append(acks)
        return self.committed

    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None:
        self.acks.append(acks)
        self.waits += 1


def test_an_append_already_committed_does_not_wait_for_acks() -> None:
    """A leader that is the whole ISR has committed each append on the spot (every offset commit of a one-broker
    cluster): InternalTopicLog returns without a wait_for_acks coroutine; otherwise it waits."""
    for committed, waits in ((True, 0), (False, 1)):
        replicas = _Replicas(committed)
        log = InternalTopicLog("__consumer_offsets", cast(StateReplicas, replicas))
        assert asyncio.run(log.append(0, b"batch")) == 7
        assert replicas.waits == waits
        assert replicas.from_coordinator  # a coordinator's own batch: the log skips its CRC re-check
        assert set(replicas.acks) == {-1}  # Kafka's coordinators write with acks=all


def test_an_append_to_a_partition_this_broker_does_not_lead_is_refused() -> None:
    """Not the leader (any more): StateWriteError naming the partition and the replica manager's error; nothing is
    appended (the coordinator answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE from it)."""

    class NotLeader(_Replicas):
        def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, E]:
            return None, E.not_leader_or_follower

    replicas = NotLeader(committed=True)
    log = InternalTopicLog("__consumer_offsets", cast(StateReplicas, replicas))
    with pytest.raises(StateWriteError, match=r"__consumer_offsets-3: not the leader \(not_leader_or_follower\)"):
        asyncio.run(log.append(3, b"batch"))
    assert replicas.acks == []
