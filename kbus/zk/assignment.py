"""Kafka's replica assignment (AdminUtils.assignReplicasToBrokers), rack-unaware and rack-aware, and its validation.

Leaders of consecutive partitions walk round the broker list from a random start; each follower list is the
leader's neighbours shifted by a per-round offset, so replicas of one broker spread over all the others. When every
broker has a `broker.rack`, the list alternates racks and a follower is skipped while a rack without a replica of
that partition remains, so replicas land in different racks (with `num.broker.processes` the rack is the host).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from kbus.common.errors import InvalidPartitionsError, InvalidReplicationFactorError, KafkaError


def _check_request(num_partitions: int, replication_factor: int, num_brokers: int) -> None:
    """AdminUtils' checks before either assignment, with Kafka's messages."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > num_brokers:
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {num_brokers}."
        )


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    _check_request(num_partitions, replication_factor, len(broker_ids))
    rng = rng or random.Random()
    brokers = list(broker_ids)
    n = len(brokers)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, next_replica_shift, j, n)])
        out[partition_id] = replicas
        partition_id += 1
    return out


def assign_replicas(
    racks: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's choice between the two: rack-unaware when no broker has a rack, rack-aware when all have one, and
    (RackAwareMode.Enforced, what brokers use) an error when only some have."""
    broker_ids = sorted(racks)
    given = {b: r for b, r in racks.items() if r}
    if not given:
        return assign_replicas_to_brokers(
            broker_ids, num_partitions, replication_factor, fixed_start_index, start_partition_id, rng
        )
    if len(given) != len(racks):
        raise KafkaError("Not all brokers have rack information for replica rack aware assignment.")
    return assign_replicas_rack_aware(
        given, num_partitions, replication_factor, fixed_start_index, start_partition_id, rng
    )


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker of each rack in turn (racks sorted, brokers by id)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack, []).append(broker)
    iters = [iter(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        nxt = next(iters[i], None)
        if nxt is not None:
            out.append(nxt)
        i = (i + 1) % len(iters)
    return out


def assign_replicas_rack_aware(
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """AdminUtils.assignReplicasToBrokersRackAware."""
    _check_request(num_partitions, replication_factor, len(racks))
    rng = rng or random.Random()
    num_racks = len(set(racks.values()))
    brokers = rack_alternated_brokers(racks)
    n = len(brokers)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    next_replica_shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    partition_id = max(0, start_partition_id)
    out: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % n == 0:
            next_replica_shift += 1
        first = (partition_id + start_index) % n
        leader = brokers[first]
        replicas = [leader]
        racks_with = {racks[leader]}
        brokers_with = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = brokers[_replica_index(first, next_replica_shift * num_racks, k, n)]
                rack = racks[broker]
                k += 1
                # skip a broker whose rack already has a replica while some rack has none, and a broker that
                # already has one while some broker has none
                if (rack not in racks_with or len(racks_with) == num_racks) and (
                    broker not in brokers_with or len(brokers_with) == n
                ):
                    replicas.append(broker)
                    racks_with.add(rack)
                    brokers_with.add(broker)
                    break
        out[partition_id] = replicas
        partition_id += 1
    return out


def _replica_index(first_replica_index: int, second_replica_shift: int, replica_index: int, n: int) -> int:
    shift = 1 + (second_replica_shift + replica_index) % (n - 1)
    return (first_replica_index + shift) % n


def start_index_for_new_partitions(broker_ids: Sequence[int], partition0_replicas: Sequence[int]) -> int:
    """AdminZkClient.createPartitions: continue the round-robin where partition 0's leader sits."""
    leader = partition0_replicas[0]
    return next((i for i, b in enumerate(broker_ids) if b >= leader), 0)


def validate_assignment(
    assignment: Mapping[int, Sequence[int]], live_brokers: set[int], first_partition: int = 0
) -> None:
    """A manual --replica-assignment: consecutive partitions, same replica count, no duplicates, known brokers."""
    if not assignment:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise InvalidPartitionsError(
            f"Partitions should be consecutive and start from {first_partition}, got {sorted(assignment)}"
        )
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1:
        raise InvalidReplicationFactorError("All partitions should have the same number of replicas")
    if 0 in sizes:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    for p, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicationFactorError(
                f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, replicas))} "
                f"for partition id {p}."
            )
        unknown = sorted(set(replicas) - live_brokers)
        if unknown:
            raise InvalidReplicationFactorError(
                f"Unknown broker(s) {unknown} in the replica assignment of partition {p}; "
                f"live brokers: {sorted(live_brokers)}"
            )
