"""KIP-932 share groups with the Java KafkaShareConsumer (kafka-clients 4.x): the same check
(java-share/ShareGroupCheck.java) against a kbus broker and against Apache Kafka 4.x in KRaft mode (one combined
broker+controller, `kafka-storage format --standalone`; Kafka 4.4's format turns share.version on by itself), so
the check is known valid on Kafka. Three members consume one partition with explicit acknowledgement: released
records come back, rejected ones never do, a fourth member's records come back when its acquisition locks run out
(group.share.record.lock.duration.ms 3000; Kafka needs group.share.min.record.lock.duration.ms lowered for that),
and no record is delivered more than group.share.delivery.count.limit (3) times."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ecosystem.java_checks import SingleFileCheck
from tests.e2e.ecosystem.kafka_jars import default_version
from tests.e2e.ecosystem.kafka_kraft import kafka4_kraft
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent / "java-share" / "ShareGroupCheck.java"
LOCK_MS, LIMIT = 3000, 3
SHARE_CONFIGS = {
    "offsets.topic.num.partitions": "1",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(LIMIT),
    "group.share.heartbeat.interval.ms": "1000",
}


@pytest.fixture(scope="module")
def check_classes(tmp_path_factory: pytest.TempPathFactory) -> SingleFileCheck:
    return SingleFileCheck.compile(SOURCE, tmp_path_factory.mktemp("share-check"), default_version("4"))


def run_check(check: SingleFileCheck, bootstrap: str) -> str:
    tag = uuid.uuid4().hex[:8]
    return check.run("ShareGroupCheck", bootstrap, f"share-{tag}", f"sg-{tag}", str(LIMIT), str(LOCK_MS), timeout=240)


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Apache Kafka 4.x, KRaft, one node as broker and controller; yields its bootstrap."""
    configs = {
        "group.share.min.record.lock.duration.ms": "1000", "group.share.min.heartbeat.interval.ms": "1000",
        **SHARE_CONFIGS,
    }
    with kafka4_kraft(tmp_path_factory.mktemp("kafka4"), configs) as bootstrap:
        yield bootstrap


def test_share_consumers_on_apache_kafka_4(check_classes: SingleFileCheck, kafka4: str) -> None:
    """The check itself, on Kafka: the test is valid when this passes."""
    run_check(check_classes, kafka4)


def test_share_consumers_on_kbus(check_classes: SingleFileCheck, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, dict(SHARE_CONFIGS)).start()
    try:
        run_check(check_classes, broker.bootstrap)
    finally:
        broker.stop()


def librdkafka_share_check(bootstrap: str) -> None:
    """The same scenario with librdkafka's share consumer (confluent-kafka's ShareConsumer): 3 members, explicit
    acknowledgement, RELEASE then ACCEPT, REJECT, always RELEASE (delivered `LIMIT` times), no duplicate ACCEPT."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
    from confluent_kafka.admin import AdminClient, NewTopic

    tag = uuid.uuid4().hex[:8]
    topic, group = f"rdshare-{tag}", f"rdsg-{tag}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    consumers = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"rd-{i}",
                                "share.acknowledgement.mode": "explicit"}) for i in range(3)]
    try:
        for c in consumers:
            c.subscribe([topic])
        # share.auto.offset.reset=latest: warm up until a record sent now reaches the group
        warm = False
        deadline = time.monotonic() + 60
        while not warm and time.monotonic() < deadline:
            producer.produce(topic, value=b"warm")
            producer.flush(10)
            for c in consumers:
                for msg in c.poll(0.3):
                    if msg.error() is None:
                        c.acknowledge(msg, AcknowledgeType.ACCEPT)
                        warm = True
                c.commit_sync()
        assert warm, "no record reached the share group"
        n = 20
        for i in range(n):
            producer.produce(topic, value=f"r{i}".encode())
            producer.flush(10)
        deliveries: dict[int, int] = {}
        accepted: dict[int, int] = {}
        counts: dict[int, list[int]] = {}
        users: set[int] = set()

        def done() -> bool:
            return all(
                (i % 4 in (0, 1) and i in accepted) or (i % 4 == 2 and i in deliveries)
                or (i % 4 == 3 and deliveries.get(i, 0) >= LIMIT) for i in range(n))

        deadline = time.monotonic() + 60
        quiet_until = None
        while time.monotonic() < deadline and (quiet_until is None or time.monotonic() < quiet_until):
            for w, c in enumerate(consumers):
                for msg in c.poll(0.2):
                    if msg.error() is not None:
                        continue
                    value = msg.value().decode()
                    if not value.startswith("r"):
                        c.acknowledge(msg, AcknowledgeType.ACCEPT)
                        continue
                    i = int(value[1:])
                    users.add(w)
                    seen = deliveries[i] = deliveries.get(i, 0) + 1
                    counts.setdefault(i, []).append(msg.delivery_count())
                    if (i % 4 == 1 and seen == 1) or i % 4 == 3:
                        ack = AcknowledgeType.RELEASE
                    elif i % 4 == 2:
                        ack = AcknowledgeType.REJECT
                    else:
                        ack = AcknowledgeType.ACCEPT
                        accepted[i] = accepted.get(i, 0) + 1
                    c.acknowledge(msg, ack)
                c.commit_sync()
            if quiet_until is None and done():
                quiet_until = time.monotonic() + 2 * LOCK_MS / 1000
        for i in range(n):
            if i % 4 in (0, 1):
                assert accepted.get(i) == 1, (i, accepted, deliveries)
            if i % 4 == 1:
                assert deliveries[i] == 2 and counts[i] == [1, 2], (i, counts)
            if i % 4 == 2:
                assert deliveries.get(i) == 1, (i, deliveries)
            if i % 4 == 3:
                assert deliveries.get(i) == LIMIT and counts[i] == list(range(1, LIMIT + 1)), (i, counts)
        assert len(users) >= 2, users
    finally:
        for c in consumers:
            c.close()


def test_librdkafka_share_consumers_on_apache_kafka_4(kafka4: str) -> None:
    librdkafka_share_check(kafka4)


def test_librdkafka_share_consumers_on_kbus(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, dict(SHARE_CONFIGS)).start()
    try:
        librdkafka_share_check(broker.bootstrap)
    finally:
        broker.stop()
