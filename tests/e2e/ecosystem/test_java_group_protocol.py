"""Java kafka-clients 4.x (the newest served) with `group.protocol=consumer` (KIP-848) against a real kbus broker,
each member in its own JVM (kbus.compat.GroupMember) so one can be killed -9: three members with each server-side
assignor (`group.remote.assignor` range and uniform), one leaving cleanly and one crashing mid-stream, and a
regex subscription (SubscriptionPattern, RE2/J, matched against the whole topic name) picking up a topic created
after it. Each test runs against kbus and against Apache Kafka 4.x in KRaft mode in the same run, so it is known
valid on Kafka. Every member commits synchronously after each batch it handled, so a record may be read twice only if
the member that read it first was killed before committing it; anything else read twice, or never, fails."""

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
# a short session so a killed member is fenced within seconds (Kafka's default and minimum are 45 s)
BROKER = {"group.consumer.session.timeout.ms": "6000", "group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # Kafka's floors for these are 45 s and 5 s: lowered to run the same settings as kbus
    configs = {**BROKER, "group.consumer.min.session.timeout.ms": "6000",
               "group.consumer.min.heartbeat.interval.ms": "500"}  # fmt: skip
    with kafka4_kraft(tmp_path_factory.mktemp("kafka4"), configs) as bootstrap:
        yield bootstrap


@pytest.fixture(params=["kbus", "kafka4"])
def bootstrap(request: pytest.FixtureRequest, broker_factory: Callable[..., BrokerProcess]) -> str:
    if request.param == "kafka4":
        return str(request.getfixturevalue("kafka4"))
    return broker_factory(BROKER).bootstrap


def java_member(checks: JavaChecks, bootstrap: str, group: str, assignor: str | None, subscription: str,
                name: str) -> MemberProcess:
    cmd = checks.java("kbus.compat.GroupMember", bootstrap, group, assignor or "-", subscription)
    return MemberProcess(bootstrap, group, "", name=name, command=cmd)


def owned(m: MemberProcess) -> set[str]:
    return set(m.owned or [])


def settled(ms: list[MemberProcess], partitions: set[str], each: int) -> bool:
    """Every partition owned by exactly one member, each member owning `each`."""
    sets = [owned(m) for m in ms]
    return all(len(s) == each for s in sets) and sorted(p for s in sets for p in s) == sorted(partitions)


def produce_slowly(bootstrap: str, topic: str, values: list[str], pause: float) -> threading.Thread:
    """Records streaming in while the group changes: one value every `pause` seconds, round-robin over the topic's
    6 partitions, from a daemon thread (already started; join it)."""

    def run() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % 6)
            p.poll(0)
            time.sleep(pause)
        p.flush(30)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def reads(ms: list[MemberProcess]) -> Counter[str]:
    return Counter(v for m in ms for v in m.values())


def uncommitted(m: MemberProcess) -> set[str]:
    """What a killed member read after its last commit: the only records the group may read again."""
    events = m.snapshot()
    last = max((i for i, e in enumerate(events) if e["event"] == "committed"), default=-1)
    return {e["v"] for e in events[last + 1:] if e["event"] == "msg"}


@pytest.mark.parametrize("assignor", ["range", "uniform"])
def test_three_java_members_leave_and_crash_without_loss(
    java_checks: dict[str, JavaChecks], bootstrap: str, members: list[MemberProcess], assignor: str
) -> None:
    topic, group = uid("jg"), uid("g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(15)
    every = {f"{topic}:{p}" for p in range(6)}
    for name in ("a", "b", "c"):
        members.append(java_member(java_checks[VERSION], bootstrap, group, assignor, f"topic:{topic}", name))
    wait_until(lambda: settled(members, every, 2), 90, "3 Java members to own 2 of the 6 partitions each")
    if assignor == "range":  # Kafka's RangeAssignor: contiguous ranges, one per member
        assert sorted(sorted(owned(m)) for m in members) == [[f"{topic}:{p}" for p in ps]
                                                             for ps in ([0, 1], [2, 3], [4, 5])]
    first = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, first, 6)
    wait_until(lambda: set(first) <= set(reads(members)), 30, "the first 300 values")

    members[1].stop()  # SIGTERM: close() leaves the group (member epoch -1)
    assert members[1].count("closed") == 1
    rest = [members[0], members[2]]
    wait_until(lambda: settled(rest, every, 3), 30, "the 2 remaining members to own 3 partitions each")

    # a member killed -9 while records stream in: its session times out, the survivor takes everything
    second = [f"w{i}" for i in range(600)]
    thread = produce_slowly(bootstrap, topic, second, 0.005)
    wait_until(lambda: sum(1 for v in members[2].values() if v.startswith("w")) >= 50, 30,
               "the member to be killed to read some of the second batch")
    members[2].kill()
    thread.join(60)
    wait_until(lambda: settled([members[0]], every, 6), 30, "the survivor to own all 6 partitions")
    wait_until(lambda: set(second) <= set(reads(members)), 30, "the 600 values produced around the kill")

    counts = reads(members)
    assert set(counts) == set(first) | set(second)  # nothing lost
    twice = {v for v, n in counts.items() if n > 1}
    assert twice <= uncommitted(members[2]), f"read twice though committed: {sorted(twice - uncommitted(members[2]))}"
    assert max(counts.values()) <= 2


def test_java_regex_subscription_picks_up_a_new_topic(
    java_checks: dict[str, JavaChecks], bootstrap: str, members: list[MemberProcess]
) -> None:
    """SubscribedTopicRegex is RE2/J matched against the whole name (Kafka's Pattern.matcher().matches()): `x-b`
    matches `x-.*` and `yx-c` does not."""
    prefix, group = uid("rx"), uid("g")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(f"{prefix}-a", 2, 1)])[f"{prefix}-a"].result(15)
    for name in ("a", "b"):
        members.append(java_member(java_checks[VERSION], bootstrap, group, None, f"regex:{prefix}-.*", name))
    wait_until(lambda: settled(members, {f"{prefix}-a:0", f"{prefix}-a:1"}, 1), 90, "2 members on topic a")
    produce(bootstrap, f"{prefix}-a", [f"a{i}" for i in range(20)], 2)

    futures = admin.create_topics([NewTopic(f"{prefix}-b", 2, 1), NewTopic(f"y{prefix}-c", 2, 1)])
    for f in futures.values():
        f.result(15)
    produce(bootstrap, f"{prefix}-b", [f"b{i}" for i in range(20)], 2)
    produce(bootstrap, f"y{prefix}-c", [f"c{i}" for i in range(20)], 2)
    every = {f"{prefix}-{t}:{p}" for t in "ab" for p in range(2)}
    wait_until(lambda: settled(members, every, 2), 60, "the new topic's partitions to be assigned too")
    want = {f"a{i}" for i in range(20)} | {f"b{i}" for i in range(20)}
    wait_until(lambda: want <= set(reads(members)), 30, "the records of both matching topics")
    time.sleep(1)
    counts = reads(members)
    assert set(counts) == want and max(counts.values()) == 1  # nothing of y...-c, nothing twice
