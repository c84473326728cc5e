"""The per-request part of the state-topic coordinators, compiled (setup.py COMPILED): which partitions of its state
topic a coordinator answers for (Kafka's GroupMetadataManager / TransactionStateManager ownedPartitions and
loadingPartitions checks), and the append of its state records (acks=-1, Kafka's AppendOrigin.COORDINATOR).
state_topic.py's StateCoordinator and InternalTopicLog, and the group coordinator's compiled CommitPath, call them:
every Heartbeat and OffsetCommit checks ownership and every OffsetCommit appends, and interpreted (a few Python-level
calls into the compiled replica manager, keywords matched by name, IntEnum members read through their class) they
were a visible share of a one-record commit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Protocol

from kio.schema.errors import ErrorCode as E

from kbus.server.log.log import AppendResult
from kbus.server.partition.partition import Partition
from kbus.server.replication.replica_manager import ReplicaManager

# plain ints (the kio enum's members are looked up through its class on each use)
NONE: Final = int(E.none)
COORDINATOR_LOAD_IN_PROGRESS: Final = int(E.coordinator_load_in_progress)
NOT_COORDINATOR: Final = int(E.not_coordinator)
_ALL: Final = -1  # the coordinators write with acks=-1 (all in-sync replicas)


class StateReplicas(Protocol):
    """What the state topic needs from the replica manager."""

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, E]: ...
    def get_partition(self, topic: str, index: int) -> Partition | None: ...
    def append_records(
        self, part: Partition, records: bytes | bytearray, acks: int, *, from_coordinator: bool = False,
        transaction_version: int = 0,
    ) -> AppendResult: ...
    def acks_satisfied(self, part: Partition, result: AppendResult, acks: int) -> bool: ...
    async def wait_for_acks(self, part: Partition, result: AppendResult, acks: int, timeout_ms: int) -> None: ...
    def add_leadership_listener(self, callback: Callable[[str, int, bool], None]) -> None: ...


class StateWriteError(Exception):
    """The coordinator's write was not acknowledged: not the leader, or the in-sync replicas did not confirm it
    within the commit timeout (the coordinator answers COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR)."""


def ownership_error(loading: dict[int, object], owned: set[int], partition: int) -> int:
    """COORDINATOR_LOAD_IN_PROGRESS while `partition` loads, NOT_COORDINATOR when this broker does not own it, else
    NONE."""
    if partition in loading:
        return COORDINATOR_LOAD_IN_PROGRESS
    if partition not in owned:
        return NOT_COORDINATOR
    return NONE


async def append_acked(replicas: StateReplicas, topic: str, partition: int, records: bytes, timeout_ms: int) -> int:
    """A coordinator's own batch appended as the leader of `topic`-`partition`, acknowledged by the in-sync replicas
    (acks=-1: refused up front when the ISR is below min.insync.replicas, NOT_ENOUGH_REPLICAS and a timeout surface
    as exceptions); StateWriteError when this broker does not lead the partition. Its first offset."""
    part, result = append_leader(replicas, topic, partition, records)
    # a leader that is the whole ISR has committed the batch already (every commit of a one-broker cluster): nothing
    # to wait on
    if not acks_committed(replicas, part, result):
        await wait_acked(replicas, part, result, timeout_ms)
    return result.first_offset


def append_leader(
    replicas: StateReplicas, topic: str, partition: int, records: bytes | bytearray | memoryview
) -> tuple[Partition, AppendResult]:
    """append_acked's append, without the wait: (the partition, the append's result), which acks_committed and
    wait_for_acks(acks=-1) take. Synchronous: the offset commit path (commit_path.py) awaits only when the in-sync
    replicas have not committed the batch yet, not a coroutine around every append. `records`: a writable
    memoryview is given away to the log (it stamps the offsets into it and writes it from there)."""
    part, error = _leader_partition(replicas, topic, partition)
    if part is None:
        raise StateWriteError(f"{topic}-{partition}: not the leader ({error.name})")
    # The coordinator built this batch (Kafka's AppendOrigin.COORDINATOR): the log does not compute its CRC again.
    # Kafka's analyzeAndValidateRecords checks it whatever the origin; here it was ~0.4 us of each offset commit, and
    # nothing a client sees changes (a follower or a reader still checks it).
    if isinstance(replicas, ReplicaManager):
        return part, replicas.append_records(part, records, _ALL, from_coordinator=True)
    data = bytes(records) if isinstance(records, memoryview) else records
    return part, replicas.append_records(part, data, _ALL, from_coordinator=True)


def acks_committed(replicas: StateReplicas, part: Partition, result: AppendResult) -> bool:
    """Have the in-sync replicas committed the append (acks=-1) already? Raises what wait_for_acks would for a
    committed batch (the ISR shrank below min.insync.replicas)."""
    if isinstance(replicas, ReplicaManager):
        return replicas.acks_satisfied(part, result, _ALL)
    return replicas.acks_satisfied(part, result, _ALL)


async def wait_acked(replicas: StateReplicas, part: Partition, result: AppendResult, timeout_ms: int) -> None:
    """Until the in-sync replicas have the append (acks=-1), after acks_committed said they had not yet."""
    await replicas.wait_for_acks(part, result, _ALL, timeout_ms)


# The broker's ReplicaManager is a compiled class: narrowed by isinstance, each call below is a direct C call (through
# the Protocol it is a Python-level call, keywords matched by name); tests' fakes take the Protocol.
def _leader_partition(replicas: StateReplicas, topic: str, partition: int) -> tuple[Partition | None, E]:
    if isinstance(replicas, ReplicaManager):
        return replicas.leader_partition(topic, partition)
    return replicas.leader_partition(topic, partition)
