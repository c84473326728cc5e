"""Coordinator failover in a replicated cluster (3 brokers + ZooKeeper, __consumer_offsets with RF=3).

The broker coordinating a group is killed with SIGKILL; the new leader of the group's __consumer_offsets partition
loads it from its replica and the group's committed offsets (and metadata) are still there.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.group_member import wait_until
from tests.kbus_processes import Cluster

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]


def committed(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, str | None]] | None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0), TopicPartition(topic, 1)])
    try:
        res = admin.list_consumer_group_offsets([req])[group].result(10)
    except Exception:
        return None
    return {tp.partition: (tp.offset, tp.metadata) for tp in res.topic_partitions}


def test_committed_offsets_survive_coordinator_failover(cluster: Cluster) -> None:
    topic, group = f"fo-{uuid.uuid4().hex[:6]}", f"fo-group-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(20)
    wait_until(
        lambda: (
            len(cluster.partitions(topic)) == 2 and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values())
        ),
        30,
        "full ISRs",
    )
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic, value=f"v{i}", partition=i % 2)
    assert p.flush(30) == 0

    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 20 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    assert seen == 20
    c.commit(
        offsets=[TopicPartition(topic, 0, 10, metadata="batch-a"), TopicPartition(topic, 1, 10, metadata="batch-b")],
        asynchronous=False,
    )
    c.close()
    expected = {0: (10, "batch-a"), 1: (10, "batch-b")}
    assert committed(cluster.bootstrap, group, topic) == expected

    coordinator = admin.describe_consumer_groups([group])[group].result(15).coordinator.id
    cluster.brokers[coordinator].kill()
    started = time.monotonic()
    wait_until(
        lambda: committed(cluster.bootstrap, group, topic) == expected,
        60,
        "the committed offsets on the new coordinator",
        interval=0.5,
    )
    print(
        f"\ngroup {group}: coordinator {coordinator} killed; offsets served again after "
        f"{time.monotonic() - started:.1f}s"
    )
    admin2 = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new_coordinator = admin2.describe_consumer_groups([group])[group].result(15).coordinator.id
    assert new_coordinator != coordinator

    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(4):
        p.produce(topic, value=f"late{i}", partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    settle = 0.0
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (len(got) < 4 or time.monotonic() < settle):
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.partition(), m.offset()))
            settle = time.monotonic() + 2
    c.close()
    # Partition n holds offsets 0..9 (committed at 10) plus the 2 new records: only those are read.
    assert sorted(got) == [(0, 10), (0, 11), (1, 10), (1, 11)]
