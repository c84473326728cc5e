"""The migration path from Apache Kafka to kbus (docs/ecosystem.md): MirrorMaker 2 (`kbus connect-mirror-maker`,
connect-mirror 3.9.2) replicating a real Apache Kafka 3.9 broker (ZooKeeper mode) into a 3-broker kbus cluster under
the same topic names (IdentityReplicationPolicy) — topics, their configs, topic ACLs and consumer-group offsets
translated through checkpoints — a group switching from Kafka to kbus at its translated offset, then the producers;
and the way back, a kbus topic replicated into Kafka (DefaultReplicationPolicy: kbus.<topic>), in the same MM2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from tests.e2e.ecosystem.apache_kafka import ApacheKafka
from tests.e2e.ecosystem.connect_workers import Worker, fetch_connect, props, shipped
from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import Cluster, wait_for

pytestmark = pytest.mark.slow

PARTITIONS = 3
# both clusters authorize with Kafka's AclAuthorizer, so ACLs exist to be synced; the tests' clients and MM2
# connect as User:ANONYMOUS over PLAINTEXT, a super user
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


@pytest.fixture
def kafka(kafka39: KafkaDistribution, zk_connect: str, tmp_path: Path) -> Iterator[ApacheKafka]:
    k = ApacheKafka(kafka39, tmp_path / "kafka", zk_connect + "-kafka", AUTHORIZER).start()
    yield k
    k.stop()


@pytest.fixture
def kbus_cluster(tmp_path: Path, zk_connect: str) -> Iterator[Cluster]:
    c = Cluster(tmp_path, zk_connect)
    for b in c.brokers.values():
        b.overrides |= AUTHORIZER
    yield c
    c.stop()


def produce(bootstrap: str, topic: str, per_partition: range, partitions: int = PARTITIONS) -> None:
    """Each partition p gets the values of `per_partition`: value v at offset v, so offsets can be checked."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in per_partition:
        for part in range(partitions):
            p.produce(topic, str(v).encode(), partition=part)
    assert p.flush(30) == 0


def read_partitions(bootstrap: str, topic: str, want: dict[int, int], group: str | None = None) -> dict[int, list[int]]:
    """The values read per partition until partition p holds want[p] values: by `group` from its committed
    offsets (subscribed, as the application would; then committed), or from the start by an assigning reader."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "reader", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})  # fmt: skip
    if group:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, p, 0) for p in want])
    got: dict[int, list[int]] = {p: [] for p in want}

    def poll() -> bool:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got[m.partition()].append(int(m.value()))
        return all(len(got[p]) >= n for p, n in want.items())

    try:
        wait_for(poll, 60, f"{want} records of {topic}")
        if group:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        c.close()


def topic_acls(admin: AdminClient, topic: str) -> set[tuple[str, str, str]]:
    f = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
                         AclPermissionType.ANY)  # fmt: skip
    return {(b.principal, b.operation.name, b.permission_type.name) for b in admin.describe_acls(f).result(20)}


def test_migrate_from_apache_kafka_to_kbus_and_back(
    kafka: ApacheKafka, kbus_cluster: Cluster, tmp_path: Path, mirror_maker: list[Worker]
) -> None:
    fetch_connect()
    kbus_cluster.start_all()
    kafka.wait_started()
    admin_kafka = AdminClient({"bootstrap.servers": kafka.bootstrap})
    admin_kbus = AdminClient({"bootstrap.servers": kbus_cluster.bootstrap})

    # on Kafka: topic orders with a config and ACLs, 100 records per partition, group billing part-way through
    orders = NewTopic("orders", PARTITIONS, 1, config={"retention.ms": "7200000"})
    admin_kafka.create_topics([orders])["orders"].result(20)
    acl = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                     AclPermissionType.ALLOW)  # fmt: skip
    write = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*",
                       AclOperation.WRITE, AclPermissionType.ALLOW)  # fmt: skip
    for f in admin_kafka.create_acls([acl, write]).values():
        f.result(20)
    produce(kafka.bootstrap, "orders", range(100))
    processed = {0: 40, 1: 60, 2: 100}  # billing's committed offsets on Kafka (all of partition 2 processed)
    billing = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "billing"})
    billing.commit(offsets=[TopicPartition("orders", p, o) for p, o in processed.items()], asynchronous=False)
    billing.close()
    # on kbus, for the way back: topic payments, 20 records per partition
    admin_kbus.create_topics([NewTopic("payments", PARTITIONS, 3)])["payments"].result(20)
    produce(kbus_cluster.bootstrap, "payments", range(20))

    # the shipped config's replication factors, its example clusters A and B replaced by these two
    base = {k: v for k, v in shipped("connect-mirror-maker.properties").items() if not k.startswith(("A", "B"))}
    mm2 = props(tmp_path / "mm2.properties", base | {
        "clusters": "kafka, kbus", "kafka.bootstrap.servers": kafka.bootstrap,
        "kbus.bootstrap.servers": kbus_cluster.bootstrap,
        "kafka->kbus.enabled": "true", "kafka->kbus.topics": "orders",
        "kbus->kafka.enabled": "true", "kbus->kafka.topics": "payments",
        # a migration keeps the topic names, so clients change only bootstrap.servers
        "kafka->kbus.replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "kafka->kbus.replication.factor": "3",  # the mirrored topics on kbus: 3 replicas
        "offset.lag.max": "10",  # an offset sync at least every 10 records: translations within ~10 of the group
        "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1", "sync.topic.acls.interval.seconds": "1",
        "sync.topic.configs.interval.seconds": "1",
        "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2"})  # fmt: skip
    mirror_maker.append(Worker.start("connect-mirror-maker.sh", [str(mm2)], 0, tmp_path))

    # Kafka -> kbus: orders arrives as orders, 3 partitions of 3 replicas, with its retention.ms, every record at
    # its source offset
    wait_for(lambda: "orders" in admin_kbus.list_topics(timeout=5).topics, 120, "orders on kbus")
    meta = admin_kbus.list_topics("orders", timeout=5).topics["orders"]
    assert sorted(meta.partitions) == list(range(PARTITIONS))
    assert all(len(p.replicas) == 3 for p in meta.partitions.values())
    res = ConfigResource("topic", "orders")
    assert admin_kbus.describe_configs([res])[res].result(20)["retention.ms"].value == "7200000"
    # a config changed on Kafka follows: MM2 sends IncrementalAlterConfigs with a DELETE of every key at its
    # default on Kafka, Kafka 3.9's remote.log.delete.on.disable too (kbus refused the whole request once)
    retention = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    changed = ConfigResource("topic", "orders", incremental_configs=[retention])
    admin_kafka.incremental_alter_configs([changed])[changed].result(20)

    def retention_synced() -> bool:
        return admin_kbus.describe_configs([res])[res].result(20)["retention.ms"].value == "3600000"

    wait_for(retention_synced, 30, "orders' new retention.ms on kbus")
    mirrored = read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(range(PARTITIONS), 100))
    assert mirrored == {p: list(range(100)) for p in range(PARTITIONS)}
    # MM2 syncs a topic's ALLOW ACLs except WRITE (only MM2 writes a mirrored topic)
    wait_for(lambda: topic_acls(admin_kbus, "orders"), 30, "the ACLs of orders on kbus")
    assert topic_acls(admin_kbus, "orders") == {("User:alice", "READ", "ALLOW")}

    # checkpoints: billing's offsets translated and committed on kbus (billing is not active there). MM2's
    # guarantee: a translated offset is never past the group's position (nothing skipped); it is the offset just
    # after the latest offset sync at or before that position, so it may lag it (records read again)
    wait_for(lambda: all(o >= 0 for o in committed(kbus_cluster.bootstrap, "billing", "orders").values()),
             60, "billing's offsets synced to kbus")  # fmt: skip
    translated = committed(kbus_cluster.bootstrap, "billing", "orders")
    assert all(0 <= translated[p] <= processed[p] for p in processed), (translated, processed)

    # producers still write to Kafka while billing switches to kbus: billing resumes at its translated offsets and
    # reads every record it had not processed on Kafka, in order; the only repeats are MM2's translation lag
    produce(kafka.bootstrap, "orders", range(100, 110))
    rest = {p: 110 - translated[p] for p in processed}
    got = read_partitions(kbus_cluster.bootstrap, "orders", rest, "billing")
    assert got == {p: list(range(translated[p], 110)) for p in processed}
    repeats = sum(processed[p] - translated[p] for p in processed)
    print(f"translated {translated} for committed {processed}: {repeats} records read again after the switch")

    # the producers switch once MM2 has copied everything they wrote to Kafka (above): billing reads on
    produce(kbus_cluster.bootstrap, "orders", range(110, 120))
    assert read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(processed, 10), "billing") == {
        p: list(range(110, 120)) for p in processed
    }

    # the way back, kbus -> Kafka: payments arrives on Kafka as kbus.payments with every record
    wait_for(lambda: "kbus.payments" in admin_kafka.list_topics(timeout=5).topics, 60, "kbus.payments on Kafka")
    back = read_partitions(kafka.bootstrap, "kbus.payments", dict.fromkeys(range(PARTITIONS), 20))
    assert back == {p: list(range(20)) for p in range(PARTITIONS)}
    assert mirror_maker[0].proc.poll() is None
