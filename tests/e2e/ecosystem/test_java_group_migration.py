"""Kafka 4's online migration with Java kafka-clients 4.x (the newest served), each member in its own JVM
(kbus.compat.GroupMember): a rolling upgrade of a group from `group.protocol=classic` to `consumer` while records
stream in. Two classic members own the partitions; two consumer-protocol members join (the group becomes a consumer
group, the classic members are assigned by the broker through JoinGroup/SyncGroup); the classic members close
(LeaveGroup) and the consumer members take everything. Run against kbus and against Apache Kafka 4.x in KRaft mode
in the same run, so the scenario is known valid on Kafka. Every member commits synchronously after each batch."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.java_checks import JavaChecks

# the same brokers (kbus and Kafka 4.x, with the same short consumer-group session), members and helpers
from tests.e2e.ecosystem.test_java_group_protocol import (  # noqa: F401 - bootstrap, kafka4 are fixtures
    VERSION,
    bootstrap,
    java_member,
    kafka4,
    owned,
    produce_slowly,
    reads,
)
from tests.group_member import MemberProcess, wait_until
from tests.integration.test_consumer_groups import produce, uid

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def shared(ms: list[MemberProcess], partitions: set[str]) -> bool:
    """Every partition owned by exactly one member, every member owning some."""
    sets = [owned(m) for m in ms]
    return all(sets) and sorted(p for s in sets for p in s) == sorted(partitions)


def uncommitted(m: MemberProcess) -> set[str]:
    """What a member read and did not commit: the batches whose commit failed (its epoch moved on under the
    commit), and what it read after its last commit. Only these may be read again by another member."""
    out: set[str] = set()
    batch: set[str] = set()
    for e in m.snapshot():
        if e["event"] == "msg":
            batch.add(e["v"])
        elif e["event"] == "committed":
            batch = set()
        elif e["event"] == "commit_failed":
            out |= batch
            batch = set()
    return out | batch


def test_java_rolling_upgrade_from_classic_to_consumer_members(
    java_checks: dict[str, JavaChecks], bootstrap: str, members: list[MemberProcess]  # noqa: F811
) -> None:
    topic, group = uid("jm"), uid("g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(15)
    every = {f"{topic}:{p}" for p in range(6)}
    checks = java_checks[VERSION]
    classic = [java_member(checks, bootstrap, group, "classic", f"topic:{topic}", f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: shared(classic, every), 90, "2 classic Java members to own the 6 partitions")
    first = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, first, 6)
    wait_until(lambda: set(first) <= set(reads(members)), 30, "the first 300 values")

    # records stream in through the whole upgrade
    second = [f"w{i}" for i in range(1200)]
    thread = produce_slowly(bootstrap, topic, second, 0.01)
    modern = [java_member(checks, bootstrap, group, "uniform", f"topic:{topic}", f"consumer-{n}") for n in ("c", "d")]
    members.extend(modern)
    wait_until(lambda: shared(members, every), 60, "the 2 classic and 2 consumer members to share the partitions")
    for m in classic:
        m.stop()  # SIGTERM: close() sends LeaveGroup
        assert m.count("closed") == 1
    wait_until(lambda: shared(modern, every), 60, "the 2 consumer members to own the 6 partitions")
    thread.join(60)
    wait_until(lambda: set(second) <= set(reads(members)), 30, "the 1200 values produced during the upgrade")

    counts = reads(members)
    assert set(counts) == set(first) | set(second)  # nothing lost
    # each batch is committed before the next poll, where partitions move: a record is read twice only if its
    # first reader's commit failed (a rebalance moved its epoch under it)
    twice = {v for v, n in counts.items() if n > 1}
    window = set().union(*(uncommitted(m) for m in members))
    assert twice <= window, f"read twice though committed: {sorted(twice - window)[:20]}"
    assert max(counts.values()) <= 2
