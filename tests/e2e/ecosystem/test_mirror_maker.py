"""MirrorMaker 2 (Kafka 3.9's connect-mirror, `kbus connect-mirror-maker`) replicating one kbus cluster into
another: the topic and its configs, and a consumer group's offsets translated through checkpoints so that the
group switches clusters without losing a record."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.e2e.ecosystem.connect_workers import CONNECT_VERSIONS, Worker, fetch_connect, props, shipped
from tests.kbus_processes import BrokerProcess, wait_for

pytestmark = pytest.mark.slow


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in values:
        p.produce(topic, str(i).encode())
    assert p.flush(20) == 0


def consume(bootstrap: str, topic: str, group: str, n: int, commit: bool = True, timeout: float = 30) -> list[int]:
    """`n` values read by `group` (then committed), and whatever else arrives within a second."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    c.subscribe([topic])
    got: list[int] = []

    def poll() -> bool:
        got.extend(int(m.value()) for m in c.consume(n - len(got), 0.5) if m.error() is None)
        return len(got) >= n

    try:
        wait_for(poll, timeout, f"{n} records of {topic} for {group}")
        if commit:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset)
    finally:
        c.close()


@pytest.mark.parametrize("version", CONNECT_VERSIONS)
def test_mirror_maker_replicates_topic_configs_and_translated_group_offsets(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path, mirror_maker: list[Worker], version: str
):
    fetch_connect(version)
    a, b = broker_factory(), broker_factory()
    admin_a = AdminClient({"bootstrap.servers": a.bootstrap})
    admin_a.create_topics([NewTopic("orders", 1, 1, config={"retention.ms": "7200000"})])["orders"].result(20)
    produce(a.bootstrap, "orders", range(100))
    assert consume(a.bootstrap, "orders", "billing", 60) == list(range(60))  # billing stops at offset 60 on A

    mm2 = props(tmp_path / "mm2.properties", shipped("connect-mirror-maker.properties", **{
        "A.bootstrap.servers": a.bootstrap, "B.bootstrap.servers": b.bootstrap,
        "A->B.topics": "orders", "B->A.enabled": "false",
        "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1", "refresh.topics.interval.seconds": "2",
        "refresh.groups.interval.seconds": "2"}))  # fmt: skip
    mirror_maker.append(Worker.start("connect-mirror-maker.sh", [str(mm2)], 0, tmp_path, version))

    # the topic, its records and its configs arrive on B under the replication policy's name "A.orders"
    admin_b = AdminClient({"bootstrap.servers": b.bootstrap})

    def mirrored() -> bool:
        return "A.orders" in admin_b.list_topics(timeout=5).topics

    wait_for(mirrored, 90, "A.orders on cluster B")
    res = ConfigResource("topic", "A.orders")
    assert admin_b.describe_configs([res])[res].result(20)["retention.ms"].value == "7200000"
    # checkpoints translate billing's offset 60 into B's offsets and MM2 commits it for billing on B: never beyond
    # 60 (nothing skipped); MM2 3.9 translates to just after the latest offset sync at or before 60 (syncs are
    # sparse, every offset.lag.max=100 records), here offset 1
    wait_for(lambda: committed(b.bootstrap, "billing", "A.orders") >= 0, 60, "billing's offset synced to B")
    translated = committed(b.bootstrap, "billing", "A.orders")
    assert 0 < translated <= 60

    # billing switches to cluster B at its translated offset and reads on: every record it had not processed on
    # A arrives (60..99), preceded by those MM2's conservative translation repeats, and records still produced
    # on A follow
    produce(a.bootstrap, "orders", range(100, 110))
    assert consume(b.bootstrap, "A.orders", "billing", 110 - translated) == list(range(translated, 110))
    assert mirror_maker[0].proc.poll() is None
