"""Kafka 4's online migration with Java kafka-clients 4.x (the newest served), each member in its own JVM
(kbus.compat.GroupMember): a rolling upgrade of a group from `group.protocol=classic` to `consumer` while records
stream in. Two classic members own the partitions; two consumer-protocol members join (the group becomes a consumer
group, the classic members are assigned by the broker through JoinGroup/SyncGroup); the classic members close
(LeaveGroup) and the consumer members take everything. Run against kbus and against Apache Kafka 4.x in KRaft mode
in the same run, so the scenario is known valid on Kafka. Every member commits synchronously after each batch."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.java_checks import VERSIONS, JavaChecks
from tests.e2e.ecosystem.kafka_kraft import kafka4_kraft
from tests.group_member import MemberProcess, wait_until
from tests.integration.test_consumer_groups import produce, uid
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

VERSION = VERSIONS[-1]  # the newest 4.x
BROKER = {"group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    configs = {**BROKER, "group.consumer.min.session.timeout.ms": "6000",
               "group.consumer.min.heartbeat.interval.ms": "500"}  # fmt: skip
    with kafka4_kraft(tmp_path_factory.mktemp("kafka4"), configs) as bootstrap:
        yield bootstrap


@pytest.fixture(params=["kbus", "kafka4"])
def bootstrap(request: pytest.FixtureRequest, broker_factory: Callable[..., BrokerProcess]) -> str:
    if request.param == "kafka4":
        return str(request.getfixturevalue("kafka4"))
    return broker_factory(BROKER).bootstrap


@pytest.fixture
def members() -> Iterator[list[MemberProcess]]:
    started: list[MemberProcess] = []
    yield started
    for m in started:
        m.kill()


def java_member(checks: JavaChecks, bootstrap: str, group: str, protocol: str, topic: str, name: str) -> MemberProcess:
    cmd = checks.java("kbus.compat.GroupMember", bootstrap, group, protocol, f"topic:{topic}")
    return MemberProcess(bootstrap, group, "", name=name, command=cmd)


def owned(m: MemberProcess) -> set[str]:
    return set(m.owned or [])


def shared(ms: list[MemberProcess], partitions: set[str]) -> bool:
    """Every partition owned by exactly one member, every member owning some."""
    sets = [owned(m) for m in ms]
    return all(sets) and sorted(p for s in sets for p in s) == sorted(partitions)


def reads(ms: list[MemberProcess]) -> Counter[str]:
    return Counter(v for m in ms for v in m.values())


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
    java_checks: dict[str, JavaChecks], bootstrap: str, members: list[MemberProcess]
) -> None:
    topic, group = uid("jm"), uid("g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(15)
    every = {f"{topic}:{p}" for p in range(6)}
    checks = java_checks[VERSION]
    classic = [java_member(checks, bootstrap, group, "classic", topic, f"classic-{n}") for n in ("a", "b")]
    members.extend(classic)
    wait_until(lambda: shared(classic, every), 90, "2 classic Java members to own the 6 partitions")
    first = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, first, 6)
    wait_until(lambda: set(first) <= set(reads(members)), 30, "the first 300 values")

    # records stream in through the whole upgrade
    second = [f"w{i}" for i in range(1200)]

    def slow_producer() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i, v in enumerate(second):
            p.produce(topic, value=v, partition=i % 6)
            p.poll(0)
            time.sleep(0.01)
        p.flush(30)

    thread = threading.Thread(target=slow_producer, daemon=True)
    thread.start()
    modern = [java_member(checks, bootstrap, group, "uniform", topic, f"consumer-{n}") for n in ("c", "d")]
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
