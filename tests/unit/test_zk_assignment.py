"""Kafka's replica assignment (AdminUtils), rack-unaware and rack-aware, checked against Kafka's own expectations."""

import random
from collections import Counter

import pytest

from kbus.common.errors import InvalidPartitionsError, InvalidReplicationFactorError, KafkaError
from kbus.zk.assignment import (
    assign_replicas,
    assign_replicas_to_brokers,
    rack_alternated_brokers,
    start_index_for_new_partitions,
    validate_assignment,
)


def test_matches_kafka_admin_utils_test_fixed_start():
    # AdminUtilsTest.testReplicaAssignment: brokers 0..4, 10 partitions, RF 3, fixed start index 0
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    assert assign_replicas_to_brokers([0, 1, 2, 3, 4], 10, 3, fixed_start_index=0) == expected


def test_leaders_spread_and_replicas_distinct():
    for seed in range(20):
        got = assign_replicas_to_brokers([1, 2, 3], 6, 3, rng=random.Random(seed))
        assert sorted(got) == list(range(6))
        assert all(len(set(r)) == 3 for r in got.values())
        leaders = Counter(r[0] for r in got.values())
        assert set(leaders.values()) == {2}


def test_start_index_is_random():
    starts = {assign_replicas_to_brokers([1, 2, 3], 1, 1, rng=random.Random(s))[0][0] for s in range(30)}
    assert starts == {1, 2, 3}


def test_single_broker():
    assert assign_replicas_to_brokers([7], 3, 1) == {0: [7], 1: [7], 2: [7]}


def test_errors_use_kafka_messages():
    with pytest.raises(InvalidReplicationFactorError, match=r"Replication factor: 3 larger than available brokers: 1."):
        assign_replicas_to_brokers([1], 1, 3)
    with pytest.raises(InvalidPartitionsError, match=r"Number of partitions must be larger than 0."):
        assign_replicas_to_brokers([1], 0, 1)
    with pytest.raises(InvalidReplicationFactorError, match=r"must be larger than 0"):
        assign_replicas_to_brokers([1], 1, 0)


def test_new_partitions_continue_round_robin():
    brokers = [0, 1, 2]
    existing = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=1)
    start = start_index_for_new_partitions(brokers, existing[0])
    assert start == 1
    more = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=start, start_partition_id=3)
    assert sorted(more) == [3, 4, 5]
    assert Counter(r[0] for r in more.values()) == Counter({0: 1, 1: 1, 2: 1})


def test_validate_manual_assignment():
    validate_assignment({0: [1, 2], 1: [2, 1]}, {1, 2})
    with pytest.raises(InvalidPartitionsError):
        validate_assignment({0: [1], 2: [1]}, {1})
    with pytest.raises(InvalidReplicationFactorError, match=r"same number"):
        validate_assignment({0: [1], 1: [1, 2]}, {1, 2})
    with pytest.raises(InvalidReplicationFactorError, match=r"Duplicate"):
        validate_assignment({0: [1, 1]}, {1})
    with pytest.raises(InvalidReplicationFactorError, match=r"Unknown broker"):
        validate_assignment({0: [1, 9]}, {1})


# ---- rack-aware (Kafka's AdminRackAwareTest) ---------------------------------------------------------------------
def test_rack_alternated_broker_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafka() -> None:
    racks: dict[int, str | None] = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert assign_replicas(racks, 7, 3, fixed_start_index=0, start_partition_id=0) == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_aware_replicas_span_hosts() -> None:
    """num.broker.processes: 2 hosts x 4 processes, rack = host; RF 2 never puts both replicas on one host."""
    racks: dict[int, str | None] = {b: ("h1" if b < 4 else "h2") for b in range(8)}
    for seed in range(20):
        out = assign_replicas(racks, 32, 2, rng=random.Random(seed))
        assert all({racks[r[0]], racks[r[1]]} == {"h1", "h2"} for r in out.values())
        leaders = [r[0] for r in out.values()]
        assert all(leaders.count(b) == 4 for b in range(8))  # leadership spread over every process


def test_some_brokers_without_a_rack_is_refused_as_kafka_does() -> None:
    with pytest.raises(KafkaError, match="Not all brokers have rack information"):
        assign_replicas({0: "h1", 1: None}, 1, 1)
    assert assign_replicas({0: None, 1: None}, 2, 2, fixed_start_index=0) == {0: [0, 1], 1: [1, 0]}
