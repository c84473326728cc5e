"""confluent-kafka helpers for the Spark tests: produce the expected data and read results back independently of
Spark."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.e2e.ecosystem import jvm_tmp


def submit_env(tmp: Path) -> dict[str, str]:
    """The environment of a `kbus spark-submit` a test starts: no PYSPARK_/SPARK_ settings of the test process, and
    the driver JVM's temporary files (artifacts-*, liblz4-java-*.so) and Spark's local dir (blockmgr-*) in `tmp`, not
    /tmp, so a driver killed -9 leaves nothing behind there."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env["SPARK_SUBMIT_OPTS"] = " ".join(jvm_tmp.options(tmp))
    env["SPARK_LOCAL_DIRS"] = str(tmp)
    return env


@dataclass(frozen=True)
class Produced:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(topic, partitions, 1, config=config or {})
    for future in admin.create_topics([new], operation_timeout=10).values():
        future.result(timeout=30)
    wait_for_partitions(bootstrap, topic, partitions)


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)], operation_timeout=10).values():
        future.result(timeout=30)
    wait_for_partitions(bootstrap, topic, total)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout: float = 20) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kbus-tests-meta"})
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is not None and meta.error is None and len(meta.partitions) == partitions:
                return
            time.sleep(0.1)
        raise TimeoutError(f"{topic} does not show {partitions} partitions")
    finally:
        consumer.close()


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | str | None, bytes | str | None]],
    *,
    partition: int | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    timestamp_ms: int | None = None,
) -> list[Produced]:
    """Produce (key, value) records and return where the broker put each one (from delivery reports)."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    delivered: list[Produced] = []
    errors: list[KafkaError] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append(Produced(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))  # type: ignore[attr-defined]

    for key, value in records:
        kwargs: dict = {"on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers is not None:
            kwargs["headers"] = headers
        if timestamp_ms is not None:
            kwargs["timestamp"] = timestamp_ms
        while True:
            try:
                producer.produce(topic, value, key, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0, "records not acknowledged within 60 s"
    assert not errors, errors[:3]
    return delivered


def consume_all(bootstrap: str, topic: str, timeout: float = 30) -> list:
    """Every record of every partition, read with assign() up to the high watermarks at call time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kbus-tests-read", "enable.auto.commit": False})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {}
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, 0) for p in ends])
        out, done = [], set()
        deadline = time.monotonic() + timeout
        while len(done) < len(ends) and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=0.5):
                if m.error():
                    raise RuntimeError(m.error())
                out.append(m)
                if m.offset() >= ends[m.partition()] - 1:
                    done.add(m.partition())
        assert len(done) == len(ends), f"{topic}: timed out reading back"
        return out
    finally:
        consumer.close()


def delete_records_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, partition, offset)]).values():
        future.result(timeout=30)


def topic_exists(bootstrap: str, topic: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return topic in admin.list_topics(timeout=10).topics
