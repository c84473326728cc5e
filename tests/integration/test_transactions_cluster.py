"""Transactions in a 3-broker cluster (RF=3, real ZooKeeper): the transaction coordinator is killed -9 in the
middle of a transaction; the broker that takes over __transaction_state finishes it, and read_committed consumers
see every committed record exactly once."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kbus.common.topics import OFFSETS_TOPIC
from kbus.server.coordinator.records import partition_for as group_partition
from kbus.server.transaction.records import TRANSACTION_STATE_TOPIC, partition_for
from tests.group_member import wait_until
from tests.kbus_processes import Cluster
from tests.txn_forgery import (
    call,
    describe_transaction,
    end_txn,
    forge_produce,
    init_producer,
    produce_v12,
    transactional_batch,
    txn_offset_commit_v5,
)

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration, pytest.mark.slow]


def read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eofs: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (len(eofs) == partitions and len(out) >= expected):
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eofs.add(m.partition())
                continue
            eofs.discard(m.partition())
            out.append(m.value())
    c.close()
    return out


def test_forged_batches_are_verified_with_a_remote_coordinator(cluster: Cluster) -> None:
    """KIP-890 between brokers: a partition led by another broker than the transactional id's coordinator asks it
    (AddPartitionsToTxn v4, verify only) before a transaction's first write there; forgeries are refused."""
    topic, tid = f"txv-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(20)
    wait_until(lambda: len(cluster.partitions(topic)) == 3
               and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), 30, "full ISRs")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(60)
    state = cluster.partitions(TRANSACTION_STATE_TOPIC)
    coordinator = state[partition_for(tid, len(state))][0]
    leaders = {part: leader for part, (leader, _) in cluster.partitions(topic).items()}
    remote = [part for part, leader in leaders.items() if leader != coordinator]
    assert remote, leaders
    forged_part = remote[0]
    real_part = next(part for part in leaders if part != forged_part)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, f"real-{i}".encode(), partition=real_part)
    assert p.flush(30) == 0
    pid, epoch, _ = describe_transaction(cluster.brokers[coordinator].bootstrap, tid)
    leader = cluster.brokers[leaders[forged_part]].bootstrap
    error, _ = forge_produce(leader, topic, forged_part, transactional_batch(pid + 1000, 0), tid)
    assert error == "invalid_producer_id_mapping"
    error, message = forge_produce(leader, topic, forged_part, transactional_batch(pid, epoch), tid)
    assert (error, message) == ("invalid_txn_state", "Partition was not added to the transaction")
    # the real producer, verified remotely on every partition (a second transaction over all three)
    p.commit_transaction(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"all-{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    got = read_committed(cluster.bootstrap, topic, 3, 40)
    assert sorted(got) == sorted([f"real-{i}".encode() for i in range(10)] + [f"all-{i}".encode() for i in range(30)])


def test_v2_partitions_are_added_through_a_remote_coordinator(cluster: Cluster) -> None:
    """Transactions v2 between brokers: a Produce v12 on a partition led by another broker than the coordinator
    adds it to the transaction (AddPartitionsToTxn v5, not verify-only); EndTxn v5's markers, with the bumped
    epoch, reach that leader and fence the old epoch there."""
    topic, tid = f"txv2-{uuid.uuid4().hex[:6]}", f"tx2-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(20)
    wait_until(lambda: len(cluster.partitions(topic)) == 3
               and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), 30, "full ISRs")
    Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid}).init_transactions(60)
    state = cluster.partitions(TRANSACTION_STATE_TOPIC)
    coordinator = cluster.brokers[state[partition_for(tid, len(state))][0]].bootstrap
    leaders = {part: cluster.brokers[leader].bootstrap for part, (leader, _) in cluster.partitions(topic).items()}
    remote = [part for part, leader in leaders.items() if leader != coordinator]
    assert remote, leaders
    part = remote[0]
    pid, epoch = init_producer(coordinator, tid)
    assert produce_v12(leaders[part], tid, topic, transactional_batch(pid, epoch, 0, b"v2-1"), part) == "none"
    assert describe_transaction(coordinator, tid) == (pid, epoch, "Ongoing")
    assert end_txn(coordinator, tid, pid, epoch, commit=True) == ("none", pid, epoch + 1)
    wait_until(lambda: describe_transaction(coordinator, tid)[2] == "CompleteCommit", 30, "the markers")
    zombie = transactional_batch(pid, epoch, 1, b"zombie")
    assert produce_v12(leaders[part], tid, topic, zombie, part) == "invalid_producer_epoch"
    assert produce_v12(leaders[part], tid, topic, transactional_batch(pid, epoch + 1, 0, b"v2-2"), part) == "none"
    assert end_txn(coordinator, tid, pid, epoch + 1, commit=False) == ("none", pid, epoch + 2)
    assert read_committed(cluster.bootstrap, topic, 3, 1) == [b"v2-1"]

    # TxnOffsetCommit v5 at a group coordinator on another broker: it adds __consumer_offsets to the transaction
    # through the remote transaction coordinator
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "warm-up"})
    c.committed([TopicPartition(topic, 0)], 20)  # __consumer_offsets exists from here
    c.close()
    wait_until(lambda: len(cluster.partitions(OFFSETS_TOPIC)) > 0, 30, "__consumer_offsets")
    offsets = cluster.partitions(OFFSETS_TOPIC)
    group = next(g for g in (f"g-{i}-{uuid.uuid4().hex[:4]}" for i in range(1000))
                 if cluster.brokers[offsets[group_partition(g, len(offsets))][0]].bootstrap != coordinator)
    group_coordinator = cluster.brokers[offsets[group_partition(group, len(offsets))][0]].bootstrap
    wait_until(lambda: describe_transaction(coordinator, tid)[2] == "CompleteAbort", 30, "the abort markers")
    assert produce_v12(leaders[part], tid, topic, transactional_batch(pid, epoch + 2, 0, b"v2-3"), part) == "none"
    assert txn_offset_commit_v5(group_coordinator, tid, group, pid, epoch + 2, topic, 11) == "none"
    assert end_txn(coordinator, tid, pid, epoch + 2, commit=True) == ("none", pid, epoch + 3)
    wait_until(lambda: describe_transaction(coordinator, tid)[2] == "CompleteCommit", 30, "the commit markers")
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        wait_until(lambda: c.committed([TopicPartition(topic, 0)], 10)[0].offset == 11, 30, "the committed offset")
    finally:
        c.close()


def finalized(bootstrap: str) -> tuple[list[tuple[str, int]], int]:
    from kio.schema.api_versions.v4.request import ApiVersionsRequest
    from kio.schema.api_versions.v4.response import ApiVersionsResponse

    r = call(bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse)
    return [(f.name, int(f.max_version_level)) for f in r.finalized_features], int(r.finalized_features_epoch)


def test_transaction_version_2_waits_for_every_broker(cluster: Cluster, raw_zk: KazooClient) -> None:
    """A rolling upgrade: while a broker that registered no transaction.version support (a kbus from before it)
    is live, no broker finalizes transactions v2, so Kafka 4 clients keep v1 (whose requests every broker
    serves); the withdrawal comes with a higher epoch, or Kafka 4 clients (which keep the features of the highest
    epoch they saw) would not see it. Once it is gone, transactions v2 is finalized again (with the newest live
    registration's epoch: clients that saw the withdrawal take it up at the next registration, such as that
    broker's return upgraded)."""
    levels, epoch = finalized(next(iter(cluster.brokers.values())).bootstrap)
    assert levels == [("transaction.version", 2)]
    old = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
           b'"endpoints":["PLAINTEXT://127.0.0.1:1"],"jmx_port":-1,"port":1,"host":"127.0.0.1",'
           b'"version":5,"timestamp":"1700000000000"}')  # an old timestamp: the order is ZooKeeper's  # fmt: skip
    raw_zk.create("/brokers/ids/99", old, ephemeral=True)
    try:
        wait_until(lambda: all(finalized(b.bootstrap)[0] == [] for b in cluster.brokers.values()), 30,
                   "every broker to withdraw transaction.version 2")
        assert all(finalized(b.bootstrap)[1] > epoch for b in cluster.brokers.values())
    finally:
        raw_zk.delete("/brokers/ids/99")
    wait_until(lambda: all(finalized(b.bootstrap) == ([("transaction.version", 2)], epoch)
                           for b in cluster.brokers.values()), 30, "transaction.version 2 finalized again")


def test_coordinator_killed_mid_transaction(cluster: Cluster) -> None:
    topic, tid = f"txc-{uuid.uuid4().hex[:6]}", f"tx-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(20)
    wait_until(lambda: len(cluster.partitions(topic)) == 3
               and all(len(isr) == 3 for _, isr in cluster.partitions(topic).values()), 30, "full ISRs")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(30):
        p.produce(topic, f"first-{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0

    state = cluster.partitions(TRANSACTION_STATE_TOPIC)
    coordinator = state[partition_for(tid, len(state))][0]
    cluster.brokers[coordinator].kill()
    started = time.monotonic()
    p.commit_transaction(90)  # finds the new coordinator, which loaded the Ongoing state from its replica
    took = time.monotonic() - started
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, f"second-{i}".encode(), partition=i % 3)
    p.commit_transaction(60)
    got = read_committed(cluster.bootstrap, topic, 3, 36)
    assert sorted(got) == sorted([f"first-{i}".encode() for i in range(30)]
                                 + [f"second-{i}".encode() for i in range(6)])
    print(f"\ncoordinator {coordinator} killed; the commit completed on its successor after {took:.1f}s")
