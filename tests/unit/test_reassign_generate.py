"""kafka-reassign-partitions --generate's choices (ReassignPartitionsCommand.getBrokerMetadata and
calculateAssignment), without a cluster."""

from __future__ import annotations

import random

import pytest

from kbus.admin.errors import AdminError
from kbus.admin.reassign import brokers_for_generate, calculate_assignment

LIVE = {1: "a", 2: "a", 3: "b", 4: "b", 5: None}


def test_listed_brokers_the_cluster_knows_with_their_racks() -> None:
    assert brokers_for_generate(LIVE, [1, 3, 42], rack_aware=True) == {1: "a", 3: "b"}
    assert brokers_for_generate(LIVE, [1, 3], rack_aware=False) == {1: None, 3: None}


def test_some_racks_missing_needs_disable_rack_aware() -> None:
    with pytest.raises(AdminError, match="Add --disable-rack-aware"):
        brokers_for_generate(LIVE, [1, 5], rack_aware=True)
    assert brokers_for_generate(LIVE, [1, 5], rack_aware=False) == {1: None, 5: None}


def test_rack_aware_plan_puts_each_partitions_replicas_in_both_racks() -> None:
    current = {("t", p): [5, 1] for p in range(8)} | {("u", 0): [1, 2, 3]}
    racks = brokers_for_generate(LIVE, [1, 2, 3, 4], rack_aware=True)
    for seed in range(20):
        plan = calculate_assignment(current, racks, random.Random(seed))
        assert sorted(plan) == sorted(current)
        assert all(len(plan[("t", p)]) == 2 and {LIVE[b] for b in plan[("t", p)]} == {"a", "b"} for p in range(8))
        assert len(set(plan[("u", 0)])) == 3  # the replication factor of the topic's first partition


def test_rack_unaware_plan_and_kafkas_errors() -> None:
    plan = calculate_assignment({("t", 0): [1, 2], ("t", 1): [2, 1]}, {3: None, 4: None}, random.Random(1))
    assert all(sorted(r) == [3, 4] for r in plan.values())
    with pytest.raises(AdminError, match=r"Replication factor: 2 larger than available brokers: 1\.") as err:
        calculate_assignment({("t", 0): [1, 2]}, {3: None})
    assert err.value.name == "INVALID_REPLICATION_FACTOR"
