"""StateCoordinator, the ownership half the group and transaction coordinators share: a partition of the state
topic is NOT_COORDINATOR until elected, COORDINATOR_LOAD_IN_PROGRESS while its load runs, NONE once loaded, and
NOT_COORDINATOR again after resignation."""

from __future__ import annotations

import asyncio
from typing import cast

import pytest
from kio.schema.errors import ErrorCode as E

from kbus.server.coordinator.commit_batch import OffsetAndMetadata, offset_commit_batch
from kbus.server.coordinator.commit_path import CommitPath
from kbus.server.coordinator.coordinator import GroupConfig
from kbus.server.coordinator.state_topic import (
    BackgroundTasks,
    InternalTopicLog,
    StateCoordinator,
    StatePartitions,
    StateReplicas,
    StateWriteError,
)
from kbus.server.coordinator.timers import Timers
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


class _GatedReplicas(_Replicas):
    """acks=-1 not committed at the append: wait_for_acks returns when the test opens the gate (the followers caught
    up). Keeps what was appended."""

    def __init__(self, committed: bool) -> None:
        super().__init__(committed)
        self.gate = asyncio.Event()
        self.appended: list[bytes] = []

    def append_records(
        self, part: Partition, records: bytes, acks: int, *, from_coordinator: bool = False
    ) -> AppendResult:
        self.appended.append(records)
        return super().append_records(part, records, acks, from_coordinator=from_coordinator)

    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None:
        await super().wait_for_acks(part, result, acks, timeout_ms)
        await self.gate.wait()


class _Owner:
    """The coordinator around a CommitPath: active, and an append error is COORDINATOR_NOT_AVAILABLE."""

    active = True

    def on_election(self, partition: int) -> None:
        pass

    def _append_error(self, partition: int, exc: Exception, *, for_offsets: bool) -> int:
        return int(E.coordinator_not_available)

    def _on_expire_heartbeat(self, group: object, member_id: str) -> None:
        pass

    def classic_heartbeat_to_consumer_group(
        self, group: object, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        raise AssertionError("no consumer group here")


class _OwnsAll:
    owned = {0}
    loading: dict[int, object] = {}


def _commit_path(replicas: _Replicas) -> CommitPath:
    return CommitPath(_Owner(), {}, {}, Timers(), lambda: 1_700_000_000_000,
                      InternalTopicLog("__consumer_offsets", cast(StateReplicas, replicas)), None,
                      GroupConfig(offsets_topic_num_partitions=1), _OwnsAll())  # fmt: skip


def test_a_commit_is_visible_once_the_in_sync_replicas_have_it() -> None:
    """CommitPath.commit appends without a coroutine per step and waits only when acks=-1 is not met at the append:
    until the replicas have the batch the offset is a pending commit and not the group's committed offset; then it
    is. A leader that is the whole ISR answers at once. The batch is offset_commit_batch's bytes either way."""
    offsets = {("t", 3): OffsetAndMetadata(42, 5, "", 1_700_000_000_000)}
    expected = offset_commit_batch("g", offsets, 1_700_000_000_000)

    async def run() -> None:
        replicas = _GatedReplicas(committed=False)
        path = _commit_path(replicas)
        task = asyncio.ensure_future(path.commit("g", "", None, -1, offsets, 8))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done() and replicas.waits == 1
        group = path.offsets_holder("g")
        assert group.offsets == {} and group.pending_offset_commits == {("t", 3): 1}
        replicas.gate.set()
        assert await task == {("t", 3): int(E.none)}
        assert group.offsets == offsets and group.pending_offset_commits == {}
        assert replicas.appended == [expected] and set(replicas.acks) == {-1} and replicas.from_coordinator

        at_once = _GatedReplicas(committed=True)
        path = _commit_path(at_once)
        assert await path.commit("g", "", None, -1, offsets, 8) == {("t", 3): int(E.none)}
        assert at_once.waits == 0 and path.offsets_holder("g").offsets == offsets
        assert at_once.appended == [expected]

    asyncio.run(run())


def test_a_commit_refused_by_the_log_stores_nothing() -> None:
    """The partition is not led here (any more): every partition gets the coordinator's append error, nothing is
    committed and no commit stays pending."""

    class NotLeader(_Replicas):
        def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, E]:
            return None, E.not_leader_or_follower

    async def run() -> None:
        path = _commit_path(NotLeader(committed=True))
        offsets = {("t", 0): OffsetAndMetadata(1), ("t", 1): OffsetAndMetadata(2)}
        refused = await path.commit("g", "", None, -1, offsets, 8)
        assert refused == dict.fromkeys(offsets, int(E.coordinator_not_available))
        group = path.offsets_holder("g")
        assert group.offsets == {} and group.pending_offset_commits == {}

    asyncio.run(run())
