"""Consumer groups against a real kbus broker with real clients (issue 4's "tests that prove it").

Members that must be killed run in their own processes (tests/group_member.py); the rest are in-process clients.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group_member import MemberProcess, wait_until
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

SESSION_MS = 6000


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, partitions: int, name: str | None = None) -> str:
    name = name or uid("t")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def produce(bootstrap: str, topic: str, values: list[str], partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple[int, str | None]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result(15)
    return {tp.partition: (tp.offset, tp.metadata) for tp in res.topic_partitions}


def settled(members: list[MemberProcess], expect: dict[str, list[int]] | None = None) -> bool:
    owned = [m.owned for m in members]
    return all(o is not None for o in owned) and (expect is None or all(m.owned == expect[m.name] for m in members))


def test_three_members_each_own_one_partition_and_a_fourth_is_idle(
    broker: BrokerProcess, members: list[MemberProcess]
) -> None:
    topic, group = create_topic(broker.bootstrap, 3), uid("abc-dashboard")
    for i in range(3):
        members.append(MemberProcess(broker.bootstrap, group, topic, name=f"dash-{i}"))

    def one_each() -> bool:
        owned = [m.owned for m in members]
        return all(o is not None and len(o) == 1 for o in owned) and sorted(o[0] for o in owned) == [0, 1, 2]

    wait_until(one_each, 45, "three members owning one partition each")
    members.append(MemberProcess(broker.bootstrap, group, topic, name="dash-3"))

    def fourth_idle() -> bool:
        fourth = members[3]
        return fourth.owned == [] and one_each_of(members[:3])

    def one_each_of(ms: list[MemberProcess]) -> bool:
        owned = [m.owned for m in ms]
        return all(o is not None and len(o) == 1 for o in owned) and sorted(o[0] for o in owned) == [0, 1, 2]

    wait_until(fourth_idle, 45, "the fourth member to join with no partition")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.state.name == "STABLE"
    assert len(desc.members) == 4
    assert sorted(len(m.assignment.topic_partitions) for m in desc.members) == [0, 1, 1, 1]
    assert all(m.host == "/127.0.0.1" for m in desc.members)


def test_killed_member_partition_moves_no_loss_and_restart_resumes(
    broker: BrokerProcess, members: list[MemberProcess]
) -> None:
    topic, group = create_topic(broker.bootstrap, 3), uid("abc-dashboard")
    for i in range(3):
        members.append(MemberProcess(broker.bootstrap, group, topic, name=f"dash-{i}", session_ms=SESSION_MS))
    wait_until(lambda: all(m.owned is not None and len(m.owned) == 1 for m in members), 45, "one partition each")

    total = 600
    values = [str(i) for i in range(total)]
    done = threading.Event()

    def producer() -> None:
        p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % 3)
            p.poll(0)
            time.sleep(0.01)
        p.flush(30)
        done.set()

    thread = threading.Thread(target=producer, daemon=True)
    thread.start()
    wait_until(lambda: sum(len(m.values()) for m in members) > 100, 30, "consumption to start")

    victim = members[0]
    lost_partition = victim.owned[0]  # type: ignore[index]
    victim.kill()
    killed_at = time.time()
    survivors = members[1:]
    taken_at = wait_until(
        lambda: next(
            (
                e["t"]
                for m in survivors
                for e in m.snapshot()
                if e["event"] == "assign" and e["t"] > killed_at and lost_partition in e["owned"]
            ),
            None,
        ),
        SESSION_MS / 1000 + 20,
        "the dead member's partition to move",
    )
    moved_after = taken_at - killed_at
    print(
        f"\npartition {lost_partition} of the killed member moved after {moved_after:.2f}s "
        f"(session.timeout.ms={SESSION_MS})"
    )
    # Detection takes session.timeout.ms after the last heartbeat; the survivors re-join within a heartbeat.
    assert moved_after < SESSION_MS / 1000 + 3, f"partition moved after {moved_after:.1f}s"
    assert sorted(p for m in survivors for p in (m.owned or [])) == [0, 1, 2]

    thread.join(60)
    assert done.is_set()
    wait_until(
        lambda: set().union(*(set(m.values()) for m in members)) >= set(values),
        60,
        "every produced record to be consumed by someone",
    )
    seen = set().union(*(set(m.values()) for m in members))
    assert seen == set(values), "at-least-once: nothing lost across the rebalance"

    for m in survivors:
        m.stop()  # graceful: the final stored offsets are committed on close
    offsets = committed(broker.bootstrap, group, topic, 3)
    assert sum(o for o, _ in offsets.values()) == total

    more = [f"late-{i}" for i in range(30)]
    produce(broker.bootstrap, topic, more, 3)
    again = MemberProcess(broker.bootstrap, group, topic, name="dash-restarted")
    members.append(again)
    wait_until(lambda: len(again.values()) >= len(more), 45, "the restarted group to read the new records")
    time.sleep(1)
    assert sorted(again.values()) == sorted(more), "a restarted group resumes at its committed offsets"
    first_offsets = {}
    for e in again.snapshot():
        if e["event"] == "msg":
            first_offsets.setdefault(e["p"], e["o"])
    assert first_offsets == {p: offsets[p][0] for p in range(3)}


def test_cooperative_sticky_rebalances_incrementally(broker: BrokerProcess, members: list[MemberProcess]) -> None:
    topic, group = create_topic(broker.bootstrap, 4), uid("coop")
    a = MemberProcess(broker.bootstrap, group, topic, name="a", strategy="cooperative-sticky")
    members.append(a)
    wait_until(lambda: a.owned == [0, 1, 2, 3], 45, "the first member to own everything")
    produce(broker.bootstrap, topic, [f"v{i}" for i in range(40)], 4)
    wait_until(lambda: len(a.values()) >= 40, 30, "the first member to consume")
    b = MemberProcess(broker.bootstrap, group, topic, name="b", strategy="cooperative-sticky")
    members.append(b)

    def split() -> bool:
        oa, ob = a.owned or [], b.owned or []
        return len(oa) == 2 and len(ob) == 2 and sorted(oa + ob) == [0, 1, 2, 3]

    wait_until(split, 45, "an even split between the two members")
    assign_events = [e for e in a.snapshot() if e["event"] == "assign"]
    revoke_events = [e for e in a.snapshot() if e["event"] == "revoke"]
    assert all(e["protocol"] == "COOPERATIVE" for e in assign_events)
    # Incremental: the first member only gave up what moved to the second, and never dropped everything.
    assert sorted(p for e in revoke_events for p in e["partitions"]) == b.owned
    assert all(e["owned"] for e in revoke_events)
    produce(broker.bootstrap, topic, [f"w{i}" for i in range(40)], 4)
    wait_until(
        lambda: len([v for v in a.values() + b.values() if v.startswith("w")]) >= 40,
        30,
        "both members to consume after the rebalance",
    )
    assert not [e for m in (a, b) for e in m.snapshot() if e["event"] == "error"]


def test_static_membership_keeps_assignment_across_quick_restart(
    broker: BrokerProcess, members: list[MemberProcess]
) -> None:
    topic, group = create_topic(broker.bootstrap, 2), uid("static")
    a = MemberProcess(broker.bootstrap, group, topic, name="a", instance_id="dash-a", session_ms=SESSION_MS)
    members.append(a)
    wait_until(lambda: a.owned == [0, 1], 45, "a to own both partitions")
    b = MemberProcess(broker.bootstrap, group, topic, name="b", instance_id="dash-b", session_ms=SESSION_MS)
    members.append(b)
    wait_until(
        lambda: a.owned is not None and len(a.owned) == 1 and b.owned is not None and len(b.owned) == 1,
        45,
        "a 1/1 split",
    )
    time.sleep(1)
    before_a = len([e for e in a.snapshot() if e["event"] in ("assign", "revoke")])
    b_partitions = b.owned
    b.kill()  # a crash: the static member sends no LeaveGroup
    b2 = MemberProcess(broker.bootstrap, group, topic, name="b", instance_id="dash-b", session_ms=SESSION_MS)
    members.append(b2)
    wait_until(lambda: b2.owned is not None, 30, "the restarted static member's assignment")
    assert b2.owned == b_partitions
    time.sleep(SESSION_MS / 1000 + 1)  # past the old session: still no rebalance
    assert len([e for e in a.snapshot() if e["event"] in ("assign", "revoke")]) == before_a, (
        "the other member saw no rebalance"
    )
    assert b2.owned == b_partitions


def test_committed_offsets_and_metadata_survive_broker_restart(broker_factory: object) -> None:
    b: BrokerProcess = broker_factory()  # type: ignore[operator]
    topic, group = create_topic(b.bootstrap, 2), uid("restart")
    produce(b.bootstrap, topic, [f"v{i}" for i in range(20)], 2)
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(
        offsets=[TopicPartition(topic, 0, 7, metadata="checkpoint: batch 3"), TopicPartition(topic, 1, 4, metadata="")],
        asynchronous=False,
    )
    got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15)
    assert [(tp.offset, tp.metadata) for tp in got] == [(7, "checkpoint: batch 3"), (4, "")]
    c.close()
    b.restart()
    assert committed(b.bootstrap, group, topic, 2) == {0: (7, "checkpoint: batch 3"), 1: (4, "")}
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 45
    while len(seen) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.setdefault(m.partition(), m.offset())
    c.close()
    assert seen == {0: 7, 1: 4}


def test_admin_views_and_delete(broker: BrokerProcess) -> None:
    topic, group = create_topic(broker.bootstrap, 1), uid("admin")
    produce(broker.bootstrap, topic, ["x"], 1)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "client.id": "viewer",
        }
    )
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            break
    c.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups().result(15).valid}
    assert listed[group].state.name == "STABLE"
    desc = admin.describe_consumer_groups([group])[group].result(15)
    assert desc.partition_assignor == "range"
    assert [m.client_id for m in desc.members] == ["viewer"]
    [fut] = admin.delete_consumer_groups([group]).values()
    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        fut.result(15)
    c.close()
    [fut] = admin.delete_consumer_groups([group]).values()
    fut.result(15)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(15).valid}
    assert committed(broker.bootstrap, group, topic, 1)[0][0] == -1001, "deleting the group deleted its offsets"


def test_kafka_python_group_consumer(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer

    topic, group = create_topic(broker.bootstrap, 2), uid("kp")
    produce(broker.bootstrap, topic, [f"v{i}" for i in range(20)], 2)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    got = []
    for record in consumer:
        got.append(record.value.decode())
        if len(got) == 20:
            break
    consumer.commit()
    consumer.close()
    assert sorted(got) == sorted(f"v{i}" for i in range(20))
    assert {p: o for p, (o, _) in committed(broker.bootstrap, group, topic, 2).items()} == {0: 10, 1: 10}


def test_aiokafka_group_consumer(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group = create_topic(broker.bootstrap, 2), uid("aio")
    produce(broker.bootstrap, topic, [f"v{i}" for i in range(20)], 2)

    async def consume() -> list[str]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[str] = []
        try:
            async with asyncio.timeout(30):
                async for record in consumer:
                    got.append(record.value.decode())
                    if len(got) == 20:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(consume())
    assert sorted(got) == sorted(f"v{i}" for i in range(20))
    assert {p: o for p, (o, _) in committed(broker.bootstrap, group, topic, 2).items()} == {0: 10, 1: 10}


def test_console_style_simple_commit_without_membership(broker: BrokerProcess) -> None:
    """assign() + commit with no group membership (generation -1): Kafka's "simple" consumer group."""
    topic, group = create_topic(broker.bootstrap, 1), uid("simple")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    assert c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset == 3
    with pytest.raises(Exception) as info:
        c.commit(offsets=[TopicPartition("no-such-topic-xyz", 0, 3)], asynchronous=False)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    c.close()


def test_deleting_a_topic_deletes_its_committed_offsets(broker: BrokerProcess) -> None:
    gone, kept, group = create_topic(broker.bootstrap, 1), create_topic(broker.bootstrap, 1), uid("deleted")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(gone, 0, 5), TopicPartition(kept, 0, 6)], asynchronous=False)
    c.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([gone])[gone].result(15)
    wait_until(
        lambda: committed(broker.bootstrap, group, gone, 1)[0][0] == -1001,
        15,
        "the deleted topic's offsets to disappear",
    )
    assert committed(broker.bootstrap, group, kept, 1)[0][0] == 6
