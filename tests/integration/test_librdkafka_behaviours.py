"""The behaviours librdkafka's own tests 0011 and 0034 check, reproduced with confluent-kafka (librdkafka) against
a real broker: keyless records on a compacted topic fail with INVALID_RECORD (KIP-467), and a fetch that holds an
error partition beside healthy ones still delivers the healthy partitions (the error partition carries empty
records, not null: librdkafka rejects the whole FetchResponse otherwise)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration


def _topic(bootstrap: str, partitions: int = 1, **configs: str) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=configs)])[name].result(10)
    return name


def _deliver(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, int]]) -> list[KafkaError | None]:
    results: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all", "retries": 0})
    for key, value, partition in records:
        p.produce(topic, value=value, key=key, partition=partition, on_delivery=lambda e, _m: results.append(e))
        p.flush(10)  # one record per request, so a refused one cannot take another down with it
    assert len(results) == len(records)
    return results


def test_0011_keyless_record_on_compacted_topic_is_invalid_record(broker):
    topic = _topic(broker.bootstrap, **{"cleanup.policy": "compact"})
    errors = _deliver(broker.bootstrap, topic, [(b"k1", b"v1", 0), (None, b"keyless", 0), (b"k2", b"v2", 0)])
    assert errors[0] is None and errors[2] is None
    assert errors[1] is not None and errors[1].code() == KafkaError.INVALID_RECORD
    # nothing of the refused batch was written: the two keyed records sit at offsets 0 and 1
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 2 and time.monotonic() < deadline:
        for m in c.consume(10, 0.5):
            if not m.error():
                got.append((m.offset(), m.key(), m.value()))
    c.close()
    assert got == [(0, b"k1", b"v1"), (1, b"k2", b"v2")]


def test_0011_keyless_records_in_one_batch_fail_it_with_per_record_errors(broker):
    """0011's variation 0: 100 records in one batch, every tenth keyless. Kafka's KIP-467 record_errors name the
    keyless ones (INVALID_RECORD); librdkafka fails the other 90 with _INVALID_DIFFERENT_RECORD."""
    topic = _topic(broker.bootstrap, **{"cleanup.policy": "compact"})
    results: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000, "acks": "all", "retries": 0})
    for i in range(100):
        key = None if i % 10 == 0 else f"k{i}".encode()
        p.produce(topic, value=f"v{i}".encode(), key=key, partition=0, on_delivery=lambda e, _m: results.append(e))
    p.flush(30)
    codes = [e.code() if e is not None else None for e in results]
    assert codes.count(KafkaError.INVALID_RECORD) == 10, codes
    assert codes.count(KafkaError._INVALID_DIFFERENT_RECORD) == 90, codes


def test_0034_error_partition_beside_healthy_ones(broker):
    topic = _topic(broker.bootstrap, partitions=2)
    _deliver(broker.bootstrap, topic, [(None, f"p0-{i}".encode(), 0) for i in range(5)] + [(None, b"p1", 1)])
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False,
            "auto.offset.reset": "error", "fetch.wait.max.ms": 100,
        }
    )
    # partition 1 at an offset past its end: OFFSET_OUT_OF_RANGE in the same FetchResponse as partition 0's data
    c.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 1000)])
    values, reset_errors = [], []
    deadline = time.monotonic() + 20
    while (len(values) < 5 or not reset_errors) and time.monotonic() < deadline:
        for m in c.consume(10, 0.5):
            if m.error():
                reset_errors.append(m.error())
            else:
                values.append(m.value())
    c.close()
    assert values == [f"p0-{i}".encode() for i in range(5)]
    assert any(e.code() == KafkaError._AUTO_OFFSET_RESET for e in reset_errors), reset_errors
