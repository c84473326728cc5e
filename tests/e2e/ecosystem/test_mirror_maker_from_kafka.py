"""The migration path from Apache Kafka to kbus (docs/ecosystem.md): MirrorMaker 2 (`kbus connect-mirror-maker`,
connect-mirror 3.9.2) replicating a real Apache Kafka 3.9 broker (ZooKeeper mode) into a 3-broker kbus cluster under
the same topic names (IdentityReplicationPolicy) — topics, their configs, topic ACLs and consumer-group offsets
translated through checkpoints — a group switching from Kafka to kbus at its translated offset, then the producers;
and the way back, a kbus topic replicated into Kafka (DefaultReplicationPolicy: kbus.<topic>), in the same MM2."""

from __future__ import annotations

import time
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
from tests.kbus_processes import Cluster, free_port, wait_for

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


# A kill -9 that lands in the source task's commit after its source offsets were written to the offsets topic
# (mm2-offsets.kafka.internal on kbus, in the task's transaction) and before its EndTxn leaves that transaction open.
# The restarted worker reads its offsets topic to the end before it joins its group and starts the task: Connect's
# KafkaBasedLog with a read_committed consumer reads up to the end offset ListOffsets gives read_uncommitted (the high
# watermark, past the open transaction), so it waits, and no new task fences the zombie. Its coordinator aborts it
# at the producer's transaction.timeout.ms: with the default 60 s (plus the 10 s abort scan) the copy resumed after
# the test's 60 s wait, as it would on Apache Kafka. The test's kill often lands there, as it follows the records'
# append, just before the commit. A 10 s timeout and a 1 s scan keep that wait short.
TXN_TIMEOUT_MS = "10000"


def produce(bootstrap: str, topic: str, per_partition: range, partitions: int = PARTITIONS) -> None:
    """Each partition p gets the values of `per_partition`: value v at offset v, so offsets can be checked."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in per_partition:
        for part in range(partitions):
            p.produce(topic, str(v).encode(), partition=part)
    assert p.flush(30) == 0


def read_partitions(bootstrap: str, topic: str, last: dict[int, int], group: str | None = None) -> dict[int, list[int]]:
    """The values read (read_committed) per partition p until value last[p] arrives: by `group` from its committed
    offsets (subscribed, as the application would; then committed), or from the start by an assigning reader.
    Values, not offsets: on kbus MM2's exactly-once transactions put their markers between the records."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "reader", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})  # fmt: skip
    if group:
        c.subscribe([topic])
    else:
        c.assign([TopicPartition(topic, p, 0) for p in last])
    got: dict[int, list[int]] = {p: [] for p in last}

    def poll() -> bool:
        for m in c.consume(500, 0.5):
            if m.error() is None:
                got[m.partition()].append(int(m.value()))
        return all(got[p] and got[p][-1] == v for p, v in last.items())

    try:
        wait_for(poll, 60, f"{topic} up to {last}")
        if group:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def high_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition("orders", p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


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
    for b in kbus_cluster.brokers.values():  # a zombie's transaction is aborted within TXN_TIMEOUT_MS + 1 s
        b.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "1000"
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
    # value v at offset v on Kafka: a value read on kbus names the Kafka position it stands for
    commit(kafka.bootstrap, "billing", processed)
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
        "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
        # exactly-once copies into kbus (KIP-618 in dedicated MM2): records and source positions in one transaction
        "kbus.exactly.once.source.support": "enabled", "dedicated.mode.enable.internal.rest": "true",
        "kbus.producer.transaction.timeout.ms": TXN_TIMEOUT_MS,  # the worker's producer.*: its tasks' producers
        "listeners": f"http://127.0.0.1:{free_port()}"})  # fmt: skip
    mirror_maker.append(Worker.start("connect-mirror-maker.sh", [str(mm2)], 0, tmp_path))

    # Kafka -> kbus: orders arrives as orders, 3 partitions of 3 replicas, with its retention.ms, every record once
    # and in order
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
    mirrored = read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(range(PARTITIONS), 99))
    assert mirrored == {p: list(range(100)) for p in range(PARTITIONS)}

    # MM2 killed -9 while it copies 1000 more records per partition, and started again: the copy still holds
    # each record once (its transactions abort; at-least-once MM2 would copy again what it had not committed)
    produce(kafka.bootstrap, "orders", range(100, 1100))
    copied = wait_for(lambda: sum(high_watermarks(kbus_cluster.bootstrap, "orders").values()) > 3 * 200, 60, "a copy")
    mirror_maker[0].kill9()
    print(f"MM2 killed -9 {copied:.1f} s into the copy at {high_watermarks(kbus_cluster.bootstrap, 'orders')}")
    mirror_maker.append(Worker.start("connect-mirror-maker.sh", [str(mm2)], 0, tmp_path))
    mirrored = read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(range(PARTITIONS), 1099))
    assert mirrored == {p: list(range(1100)) for p in range(PARTITIONS)}
    # MM2 syncs a topic's ALLOW ACLs except WRITE (only MM2 writes a mirrored topic)
    wait_for(lambda: topic_acls(admin_kbus, "orders"), 30, "the ACLs of orders on kbus")
    assert topic_acls(admin_kbus, "orders") == {("User:alice", "READ", "ALLOW")}

    # checkpoints: billing's offsets translated and committed on kbus (billing is not active there). MM2's
    # guarantee: a translated offset is never past the group's position (nothing skipped); it is the offset just
    # after the latest offset sync at or before that position, so it may lag it (records read again)
    # MM2's checkpoint task translates only from the offset syncs it holds, and of those written before it started
    # it keeps the latest alone ("Skipped (... is ahead of upstream consumer group ...)"): when MM2 copied the
    # backlog before the task ran, offsets 40 and 60 never translate. So billing goes on consuming on Kafka, as
    # during a live migration: 10 more records per partition, committed 5 short of the end, until its offsets
    # appear on kbus (in most runs at once)
    end, deadline = 1100, time.monotonic() + 60
    while not all(o >= 0 for o in committed(kbus_cluster.bootstrap, "billing", "orders").values()):
        assert time.monotonic() < deadline, "billing's offsets not synced to kbus"
        produce(kafka.bootstrap, "orders", range(end, end + 10))
        end += 10
        processed = dict.fromkeys(range(PARTITIONS), end - 5)
        commit(kafka.bootstrap, "billing", processed)
        time.sleep(3)
    translated = committed(kbus_cluster.bootstrap, "billing", "orders")

    # producers still write to Kafka while billing switches to kbus: billing resumes at its translated offsets and
    # reads every record it had not processed on Kafka, in order, nothing twice except, once, the records between
    # its translated position and its Kafka position (resumed_at <= processed: MM2 never skips)
    produce(kafka.bootstrap, "orders", range(end, end + 10))
    end += 10
    got = read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(processed, end - 1), "billing")
    resumed_at = {p: got[p][0] for p in processed}
    assert all(resumed_at[p] <= processed[p] for p in processed), (resumed_at, processed)
    assert got == {p: list(range(resumed_at[p], end)) for p in processed}
    repeats = sum(processed[p] - resumed_at[p] for p in processed)
    print(f"billing committed {processed} on Kafka, resumed on kbus at {resumed_at} (kbus offsets {translated}): "
          f"{repeats} records read again after the switch")

    # the producers switch once MM2 has copied everything they wrote to Kafka (above): billing reads on
    produce(kbus_cluster.bootstrap, "orders", range(end, end + 10))
    assert read_partitions(kbus_cluster.bootstrap, "orders", dict.fromkeys(processed, end + 9), "billing") == {
        p: list(range(end, end + 10)) for p in processed
    }

    # the way back, kbus -> Kafka: payments arrives on Kafka as kbus.payments with every record
    wait_for(lambda: "kbus.payments" in admin_kafka.list_topics(timeout=5).topics, 60, "kbus.payments on Kafka")
    back = read_partitions(kafka.bootstrap, "kbus.payments", dict.fromkeys(range(PARTITIONS), 19))
    # at least once, in order: exactly-once is enabled for the copies into kbus only, so MM2's kbus->Kafka task, when
    # the kill -9 above lands after it sent records and before it flushed their source offsets, sends them again
    # from its last flushed position (Apache Kafka's MM2 does the same); nothing may be lost or reordered
    assert {p: list(dict.fromkeys(back[p])) for p in back} == {p: list(range(20)) for p in range(PARTITIONS)}, back
    assert mirror_maker[-1].proc.poll() is None
