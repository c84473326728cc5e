"""The consumer group protocol (KIP-848, `group.protocol=consumer`) against a real kbus broker with librdkafka
(confluent-kafka): members in their own processes (tests/group_member.py) so one can be killed -9.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group_member import MemberProcess, wait_until
from tests.integration.test_consumer_groups import committed, create_topic, produce, uid
from tests.kbus_processes import BrokerProcess, Cluster, kbus

pytestmark = pytest.mark.integration

# A short session so a killed member is fenced within seconds (Kafka's default is 45 s, its minimum 45 s too).
BROKER = {
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "500",
    "offsets.topic.num.partitions": "3",
}


@pytest.fixture
def kbroker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory(BROKER)


def owned_sets(ms: list[MemberProcess]) -> list[set[int]]:
    return [set(m.owned or []) for m in ms]


def partitioned(ms: list[MemberProcess], partitions: int) -> bool:
    """Every partition owned by exactly one member, every member owning some."""
    sets = owned_sets(ms)
    if any(not s for s in sets):
        return False
    together = [p for s in sets for p in s]
    return sorted(together) == list(range(partitions))


def test_three_members_share_six_partitions_and_rebalance_without_loss(
    kbroker: BrokerProcess, members: list[MemberProcess]
) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 6)
    group = uid("g")
    for name in ("a", "b", "c"):
        members.append(MemberProcess(bootstrap, group, topic, name=name, protocol="consumer"))
    # reconciliation is incremental: wait for its end, not for the first moment every partition has an owner
    wait_until(lambda: partitioned(members, 6) and sorted(len(s) for s in owned_sets(members)) == [2, 2, 2], 30,
               "3 members to own 2 of the 6 partitions each")

    first = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, first, 6)
    wait_until(lambda: len({v for m in members for v in m.values()}) == 300, 30, "the first 300 values")

    # a member leaving cleanly (epoch -1): the two others take its partitions
    leaving = members[1]
    leaving.stop()
    rest = [members[0], members[2]]
    wait_until(lambda: partitioned(rest, 6), 30, "the 2 remaining members to own all 6 partitions")

    # a member killed -9: its session times out and the survivor gets everything
    members[2].kill()
    survivor = [members[0]]
    wait_until(lambda: partitioned(survivor, 6), 30, "the last member to own all 6 partitions")

    second = [f"w{i}" for i in range(300)]
    produce(bootstrap, topic, second, 6)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(second) <= seen(), 30, "the second 300 values")
    assert set(first) | set(second) <= seen()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_remote_assignor_is_used(kbroker: BrokerProcess, members: list[MemberProcess], assignor: str) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = uid("g")
    for name in ("a", "b"):
        members.append(MemberProcess(bootstrap, group, topic, name=name, protocol="consumer",
                                     remote_assignor=assignor))
    wait_until(lambda: partitioned(members, 4) and sorted(len(s) for s in owned_sets(members)) == [2, 2], 30,
               "2 members to own 2 of the 4 partitions each")
    sets = owned_sets(members)
    if assignor == "range":
        assert sorted(sorted(s) for s in sets) == [[0, 1], [2, 3]]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(15)
    assert str(described.type).endswith("CONSUMER")
    assert described.partition_assignor == assignor


def test_regex_subscription_picks_up_a_new_topic(kbroker: BrokerProcess) -> None:
    bootstrap = kbroker.bootstrap
    prefix = uid("rx")
    first = create_topic(bootstrap, 2, f"{prefix}-one")
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": uid("g"),
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
    })
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        produce(bootstrap, first, ["a0", "a1"], 2)
        got: set[str] = set()

        def poll_for(values: set[str], timeout: float) -> None:
            deadline = time.monotonic() + timeout
            while not values <= got and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got.add(msg.value().decode())
            assert values <= got, f"missing {values - got}"

        poll_for({"a0", "a1"}, 30)
        second = create_topic(bootstrap, 2, f"{prefix}-two")
        produce(bootstrap, second, ["b0", "b1"], 2)
        poll_for({"b0", "b1"}, 30)
        assert {tp.topic for tp in consumer.assignment()} == {first, second}
    finally:
        consumer.close()


def test_commit_and_fetch_offsets_with_member_epochs(kbroker: BrokerProcess) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 2)
    group = uid("g")
    produce(bootstrap, topic, [f"v{i}" for i in range(10)], 2)
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "auto.offset.reset": "earliest", "enable.auto.commit": False}
    c = Consumer(conf)
    c.subscribe([topic])
    n = 0
    deadline = time.monotonic() + 30
    while n < 10 and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            n += 1
    assert n == 10
    committed = c.commit(asynchronous=False)
    assert committed is not None and all(tp.error is None for tp in committed)
    c.close()
    # a second member of the same group starts where the first committed
    c2 = Consumer(conf)
    try:
        c2.subscribe([topic])
        wait_until(lambda: c2.poll(0.2) is None and len(c2.assignment()) == 2, 30, "the assignment")
        positions = {tp.partition: tp.offset for tp in c2.committed(c2.assignment(), timeout=10)}
        assert positions == {0: 5, 1: 5}
    finally:
        c2.close()


@pytest.mark.slow  # four CLI runs of ~5 s each
def test_consumer_groups_describe_shows_a_consumer_group(
    kbroker: BrokerProcess, members: list[MemberProcess]
) -> None:
    bootstrap = kbroker.bootstrap
    topic = create_topic(bootstrap, 4)
    group = uid("g")
    for name in ("a", "b"):
        members.append(MemberProcess(bootstrap, group, topic, name=name, protocol="consumer",
                                     remote_assignor="range"))
    wait_until(lambda: partitioned(members, 4) and sorted(len(s) for s in owned_sets(members)) == [2, 2], 30,
               "2 members to own 2 partitions each")
    produce(bootstrap, topic, [f"v{i}" for i in range(8)], 4)
    wait_until(lambda: len({v for m in members for v in m.values()}) == 8, 30, "the 8 values")

    def run(*args: str) -> list[str]:
        r = kbus("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, *args)
        assert r.returncode == 0, r.stderr
        return [line for line in r.stdout.splitlines() if line.strip()]

    state = run("--state", "--verbose")
    assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                                "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
    row = state[1].split()
    assert row[0] == group and row[3:] == ["range", "Stable", row[5], row[5], "2"] and int(row[5]) >= 2
    epoch = row[5]

    rows = run("--members", "--verbose")
    assert rows[0].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                               "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    assignments = sorted(line.split()[6] for line in rows[1:])
    assert assignments == [f"{topic}:0,1", f"{topic}:2,3"]
    for line in rows[1:]:
        cols = line.split()
        assert cols[4] == "2" and cols[5] == cols[7] == epoch and cols[6] == cols[8]

    offsets = run()
    assert offsets[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert sorted(line.split()[2] for line in offsets[1:]) == ["0", "1", "2", "3"]
    listed = kbus("consumer-groups", "--bootstrap-server", bootstrap, "--list")
    assert group in listed.stdout.split()


@pytest.mark.zookeeper
@pytest.mark.slow
def test_members_keep_their_partitions_when_the_coordinator_is_killed(
    cluster: Cluster, members: list[MemberProcess]
) -> None:
    """The group's records are in __consumer_offsets (RF=3): after kill -9 of its coordinator the new one loads
    the group, the members' heartbeats carry on with their epochs, nobody loses or gives up a partition, and
    everything produced after the kill is read."""
    bootstrap = cluster.bootstrap
    topic = uid("fo")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 4, 3)])[topic].result(20)
    wait_until(lambda: len(cluster.partitions(topic)) == 4
               and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), 30, "full ISRs")
    group = uid("g")
    for name in ("a", "b"):
        members.append(MemberProcess(bootstrap, group, topic, name=name, protocol="consumer"))
    wait_until(lambda: partitioned(members, 4), 60, "2 members to share 4 partitions")
    first = [f"v{i}" for i in range(200)]
    produce(bootstrap, topic, first, 4)
    seen = lambda: {v for m in members for v in m.values()}  # noqa: E731
    wait_until(lambda: set(first) <= seen(), 30, "the first 200 values")
    time.sleep(1)  # auto-commit (200 ms) ships the stored offsets

    coordinator = admin.describe_consumer_groups([group])[group].result(15).coordinator.id
    owned_before = owned_sets(members)
    revokes_before = [m.count("revoke") for m in members]
    cluster.brokers[coordinator].kill()
    second = [f"w{i}" for i in range(200)]
    produce(cluster.bootstrap, topic, second, 4)
    wait_until(lambda: set(second) <= seen(), 90, "the 200 values produced after the kill")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = admin.describe_consumer_groups([group])[group].result(15)
    assert new.coordinator.id != coordinator and len(new.members) == 2
    assert owned_sets(members) == owned_before
    assert [m.count("revoke") for m in members] == revokes_before  # no partition lost or handed back


@pytest.mark.zookeeper
@pytest.mark.slow
def test_group_recovers_when_the_coordinator_is_killed_mid_rebalance(
    cluster: Cluster, members: list[MemberProcess]
) -> None:
    """kill -9 of the coordinator while a third member is being reconciled in (the two others still have to
    revoke partitions for it): the new coordinator loads the group, its target assignment and the committed
    offsets from __consumer_offsets (RF=3) and finishes the rebalance; nothing committed before the kill is read
    again and everything produced after it is read."""
    bootstrap = cluster.bootstrap
    topic = uid("mr")
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client cancels its futures
    admin.create_topics([NewTopic(topic, 6, 3)])[topic].result(20)
    wait_until(lambda: len(cluster.partitions(topic)) == 6
               and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), 30, "full ISRs")
    group = uid("g")
    for name in ("a", "b"):
        members.append(MemberProcess(bootstrap, group, topic, name=name, protocol="consumer"))
    wait_until(lambda: partitioned(members, 6) and sorted(len(s) for s in owned_sets(members)) == [3, 3], 60,
               "2 members to own 3 of the 6 partitions each")
    first = [f"v{i}" for i in range(300)]
    produce(bootstrap, topic, first, 6)
    seen = lambda: [v for m in members for v in m.values()]  # noqa: E731
    wait_until(lambda: set(first) <= set(seen()), 30, "the first 300 values")
    wait_until(lambda: sum(o for o, _ in committed(bootstrap, group, topic, 6).values()) == 300, 30,
               "auto-commit to ship the offsets of all 300")

    described = admin.describe_consumer_groups([group])[group].result(15)
    coordinator = described.coordinator.id
    settled_at = [len(m.snapshot()) for m in members]  # the events of the third member's rebalance come after
    members.append(MemberProcess(bootstrap, group, topic, name="c", protocol="consumer"))
    # the coordinator has taken the newcomer in (its heartbeat bumped the group epoch): kill it before the
    # newcomer owns anything, i.e. mid-rebalance (the others may have started revoking for it)
    wait_until(lambda: len(admin.describe_consumer_groups([group])[group].result(15).members) == 3, 30,
               "the coordinator to take the third member in")
    cluster.brokers[coordinator].kill()
    assert members[2].owned is None, "killed too late: the rebalance had finished"

    second = [f"w{i}" for i in range(300)]
    produce(cluster.bootstrap, topic, second, 6)
    wait_until(lambda: set(second) <= set(seen()), 90, "the 300 values produced after the kill")
    wait_until(lambda: partitioned(members, 6) and sorted(len(s) for s in owned_sets(members)) == [2, 2, 2], 60,
               "the rebalance to finish on the new coordinator: 2 partitions each")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # kept, as above
    new = admin.describe_consumer_groups([group])[group].result(30)
    assert new.coordinator.id != coordinator and len(new.members) == 3
    # the members kept their epochs through the failover: each of the first two handed exactly one partition to the
    # newcomer (sticky uniform assignment); a member the new coordinator did not know would lose all three
    for m, since in zip(members[:2], settled_at, strict=True):
        moves = [(e["event"], e["partitions"]) for e in m.snapshot()[since:] if e["event"] in ("assign", "revoke")]
        assert sum(len(ps) for event, ps in moves if event == "revoke") == 1, (m.name, moves)
    values = seen()
    assert sorted(v for v in values if v.startswith("v")) == sorted(first)  # committed: none read twice
    assert set(values) == set(first) | set(second)
