"""Transaction verification (KIP-890 part 1) on a real broker: a Produce carrying a transactional batch for a
made-up producer id / epoch, or for a partition its transaction never added, is refused instead of opening a
transaction no coordinator knows of (which held the last stable offset back forever: read_committed consumers
froze). Hand-made kio frames for the forgeries, confluent-kafka for the real transactions."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kbus_processes import BrokerProcess, kbus, wait_for
from tests.txn_forgery import describe_transaction, forge_produce, forge_txn_offset_commit, transactional_batch

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-verify")).start()
    # a real transactional producer first, so that __transaction_state exists (the coordinator can answer)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "warm-up"})
    p.init_transactions(30)
    yield b
    b.stop()


def new_topic(b: BrokerProcess, partitions: int = 1) -> str:
    name = f"tv-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)
    return name


def read_committed(b: BrokerProcess, topic: str, partition: int, expected: int, timeout: float = 10) -> list[bytes]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(out) < expected:
        for m in c.consume(100, 0.3):
            if m.error() is None:
                out.append(m.value())
            elif m.error().code() != KafkaError._PARTITION_EOF:
                raise AssertionError(m.error())
    c.close()
    return out


def plain_produce(b: BrokerProcess, topic: str, value: bytes, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap})
    p.produce(topic, value, partition=partition)
    assert p.flush(15) == 0


def test_transactional_records_need_the_requests_transactional_id(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    error, _ = forge_produce(broker.bootstrap, topic, 0, transactional_batch(4242, 0), None)
    assert error == "transactional_id_authorization_failed"


def test_a_forged_batch_for_a_made_up_producer_is_refused(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    # an unknown transactional id, and a known one with another producer id
    for tid in (f"nobody-{uuid.uuid4().hex[:6]}", "warm-up"):
        error, _ = forge_produce(broker.bootstrap, topic, 0, transactional_batch(987654, 3), tid)
        assert error == "invalid_producer_id_mapping"
    # nothing was appended, so nothing holds read_committed consumers back
    plain_produce(broker, topic, b"after")
    assert read_committed(broker, topic, 0, 1) == [b"after"]


def test_a_partition_not_added_to_the_transaction_is_refused(broker: BrokerProcess) -> None:
    topic, tid = new_topic(broker, 2), f"real-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"real-%d" % i, partition=0)
    assert p.flush(15) == 0
    pid, epoch, state = describe_transaction(broker.bootstrap, tid)
    assert state == "Ongoing"
    # the real producer id and epoch, on a partition its transaction does not include
    error, message = forge_produce(broker.bootstrap, topic, 1, transactional_batch(pid, epoch), tid)
    assert (error, message) == ("invalid_txn_state", "Partition was not added to the transaction")
    # an older epoch of the same producer: fenced
    error, _ = forge_produce(broker.bootstrap, topic, 1, transactional_batch(pid, epoch - 1), tid)
    assert error == "invalid_producer_epoch"
    p.commit_transaction(30)
    assert read_committed(broker, topic, 0, 5) == [b"real-%d" % i for i in range(5)]
    plain_produce(broker, topic, b"after", partition=1)
    assert read_committed(broker, topic, 1, 1) == [b"after"]


def test_many_transactions_through_one_producer(broker: BrokerProcess) -> None:
    """Each transaction's first write on each partition is verified; later writes are not (the cache)."""
    topic, tid = new_topic(broker, 3), f"many-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid, "linger.ms": 1})
    p.init_transactions(30)
    for round_ in range(5):
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, b"%d-%d" % (round_, i), partition=i % 3)
        if round_ == 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    got = [v for part in range(3) for v in read_committed(broker, topic, part, 40)]
    assert sorted(got) == sorted(b"%d-%d" % (r, i) for r in (0, 1, 3, 4) for i in range(30))


def test_verification_is_a_dynamic_broker_config(broker: BrokerProcess) -> None:
    """transaction.partition.verification.enable=false (Kafka's own switch) lets the forgery through, as Kafka
    3.9 does then; back to true, it is refused again."""
    topic = new_topic(broker)

    def set_verification(value: str) -> None:
        res = kbus("configs", "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "brokers",
                   "--entity-default", "--add-config", f"transaction.partition.verification.enable={value}")
        assert res.returncode == 0, res.stderr

    set_verification("false")
    try:
        wait_for(lambda: forge_produce(broker.bootstrap, topic, 0, transactional_batch(555, 0), "off")[0] == "none",
                 timeout=20, what="verification off")
    finally:
        set_verification("true")
    wait_for(lambda: forge_produce(broker.bootstrap, topic, 0, transactional_batch(556, 0), "on")[0]
             == "invalid_producer_id_mapping", timeout=20, what="verification on again")


def test_transactional_offsets_are_verified_too(broker: BrokerProcess) -> None:
    """TxnOffsetCommit: the __consumer_offsets partition must be in the producer's transaction (AddOffsetsToTxn),
    as Kafka 3.9 verifies it; a forged commit would leave a transaction open on __consumer_offsets."""
    topic, tid, group = new_topic(broker), f"offs-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # the group's coordinator is up
    c.close()
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"x")
    assert p.flush(15) == 0
    pid, epoch, _ = describe_transaction(broker.bootstrap, tid)
    bs = broker.bootstrap
    assert forge_txn_offset_commit(bs, tid, group, pid + 77, epoch, topic) == "invalid_producer_id_mapping"
    assert forge_txn_offset_commit(bs, tid, group, pid, epoch, topic) == "invalid_txn_state"
    p.abort_transaction(30)
