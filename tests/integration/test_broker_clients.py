"""Real Kafka clients against a real kbus broker process."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
import zlib
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def new_topic(admin_bootstrap: str, partitions: int = 1, **configs: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": admin_bootstrap})
    fut = admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name]
    fut.result(10)
    return name


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 100}
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    import time

    deadline = time.monotonic() + timeout
    while len(out) < expected and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(m.error())
            out.append(m)
    c.close()
    return out


def test_produce_consume_100k_keyed_three_partitions(broker):
    topic = new_topic(broker.bootstrap, partitions=3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "acks": "all"})
    n = 100_000
    keys = [f"key-{i % 97}".encode() for i in range(n)]
    errors = []
    for i in range(n):
        p.produce(topic, value=f"{i}".encode(), key=keys[i], on_delivery=lambda e, m: e and errors.append(e))
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors
    msgs = consume_all(broker.bootstrap, topic, 3, n)
    assert len(msgs) == n
    per_key = defaultdict(list)
    for m in msgs:
        # librdkafka's default partitioner (consistent_random): CRC32(key) % partitions
        assert m.partition() == zlib.crc32(m.key()) % 3
        per_key[m.key()].append(int(m.value()))
    for values in per_key.values():
        assert values == sorted(values)  # per-key order holds
    assert sorted(int(m.value()) for m in msgs) == list(range(n))
    # offsets per partition are dense, from 0
    by_part = defaultdict(list)
    for m in msgs:
        by_part[m.partition()].append(m.offset())
    for offsets in by_part.values():
        assert offsets == list(range(len(offsets)))


def test_idempotent_producer_and_headers(broker):
    topic = new_topic(broker.bootstrap)
    p = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "compression.type": "zstd"})
    for i in range(1000):
        p.produce(topic, value=b"v%d" % i, key=b"k", headers=[("h", b"x%d" % i)])
    assert p.flush(30) == 0
    msgs = consume_all(broker.bootstrap, topic, 1, 1000)
    assert [m.value() for m in msgs] == [b"v%d" % i for i in range(1000)]
    assert msgs[5].headers() == [("h", b"x5")]


def test_list_offsets_earliest_latest_and_by_timestamp(broker):
    topic = new_topic(broker.bootstrap)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(10):
        p.produce(topic, value=b"x", timestamp=1_000_000 + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 10)
    found = c.offsets_for_times([TopicPartition(topic, 0, 1_000_000 + 4500)], timeout=10)
    assert found[0].offset == 5
    found = c.offsets_for_times([TopicPartition(topic, 0, 9_999_999_999)], timeout=10)
    assert found[0].offset == -1
    c.close()


def test_auto_create_topic_and_unknown_topic(broker):
    name = f"auto-{uuid.uuid4().hex[:8]}"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(name, b"hello")
    assert p.flush(20) == 0
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(name, timeout=10)
    assert len(md.topics[name].partitions) == 1


def test_create_topic_errors(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = new_topic(broker.bootstrap)
    cases = {
        topic: (NewTopic(topic, 1, 1), "TOPIC_ALREADY_EXISTS"),
        "bad/name": (NewTopic("bad/name", 1, 1), "TOPIC_EXCEPTION"),  # librdkafka's name for 17
        "rf-too-big": (NewTopic("rf-too-big", 1, 3), "INVALID_REPLICATION_FACTOR"),
        "bad-config": (NewTopic("bad-config", 1, 1, config={"retention.ms": "abc"}), "INVALID_CONFIG"),
    }
    for name, (nt, expected) in cases.items():
        with pytest.raises(Exception) as info:
            admin.create_topics([nt])[nt.topic].result(10)
        assert info.value.args[0].name() == expected, name


def test_delete_records_and_create_partitions(broker):
    from confluent_kafka.admin import NewPartitions

    topic = new_topic(broker.bootstrap)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(100):
        p.produce(topic, b"%d" % i)
    p.flush(10)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = admin.delete_records([TopicPartition(topic, 0, 40)])
    assert next(iter(res.values())).result(10).low_watermark == 40
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "x"})
    assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (40, 100)
    c.close()
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(10)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4


def test_kcat_metadata_produce_consume(broker):
    assert shutil.which("kcat"), "kcat missing: apt-get install kcat (the .ci/run does)"
    topic = new_topic(broker.bootstrap)
    md = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J"], capture_output=True, text=True, timeout=30)
    assert md.returncode == 0, md.stderr
    assert topic in {t["topic"] for t in json.loads(md.stdout)["topics"]}
    prod = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", topic, "-K:"],
        input="a:1\nb:2\nc:3\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert prod.returncode == 0, prod.stderr
    cons = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k=%s@%o\n"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cons.returncode == 0, cons.stderr
    assert cons.stdout.split() == ["a=1@0", "b=2@1", "c=3@2"]


def test_kafka_python_client(broker):
    import kafka

    topic = new_topic(broker.bootstrap)
    prod = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    for i in range(50):
        prod.send(topic, key=b"k", value=b"v%d" % i)
    prod.flush(30)
    prod.close()
    cons = kafka.KafkaConsumer(
        topic,
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        enable_auto_commit=False,
        group_id=None,
    )
    values = [m.value for m in cons]
    cons.close()
    assert values == [b"v%d" % i for i in range(50)]


def test_aiokafka_client(broker):
    import asyncio

    import aiokafka

    topic = new_topic(broker.bootstrap)

    async def run() -> list[bytes]:
        prod = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await prod.start()
        for i in range(20):
            await prod.send_and_wait(topic, b"a%d" % i)
        await prod.stop()
        cons = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await cons.start()
        out = []
        try:
            while len(out) < 20:
                batch = await asyncio.wait_for(cons.getmany(timeout_ms=1000), 20)
                for msgs in batch.values():
                    out.extend(m.value for m in msgs)
        finally:
            await cons.stop()
        return out

    assert asyncio.run(run()) == [b"a%d" % i for i in range(20)]


def test_kcat_group_consumer(broker):
    """kcat -G: the balanced consumer (FindCoordinator, JoinGroup, SyncGroup, OffsetCommit) of librdkafka 2.0.2."""
    topic = new_topic(broker.bootstrap, partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(20):
        p.produce(topic, value=b"g%d" % i, partition=i % 2)
    assert p.flush(10) == 0
    group = f"kcat-{uuid.uuid4().hex[:6]}"
    cons = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", group, "-o", "beginning", "-e", "-f", "%s\n", topic],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cons.returncode == 0, cons.stderr
    assert sorted(cons.stdout.split()) == sorted(f"g{i}" for i in range(20))
    # the group committed its position: a second run from the committed offsets reads nothing new
    again = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-G", group, "-e", "-f", "%s\n", topic],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.split() == []
