"""Transactions v2 (KIP-890 part 2) in raw frames against a real broker, as a Kafka 4 producer speaks them:
ApiVersions finalizes transaction.version 2; Produce v12 and TxnOffsetCommit v5 add their partitions to the
transaction without AddPartitionsToTxn/AddOffsetsToTxn; EndTxn v5 bumps the epoch at every transaction's end and
returns it; the markers carry the new epoch, so the old epoch is fenced on the partitions and at the
coordinator. (The Java 4.x client's default transactions: tests/e2e/ecosystem/java TransactionChecks.)"""

from __future__ import annotations

import datetime
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v3.response import ApiVersionsResponse as ApiVersionsV3Response
from kio.schema.api_versions.v4.request import ApiVersionsRequest
from kio.schema.api_versions.v4.response import ApiVersionsResponse
from kio.schema.produce.v11.request import PartitionProduceData as PartitionProduceDataV11
from kio.schema.produce.v11.request import ProduceRequest as ProduceRequestV11
from kio.schema.produce.v11.request import TopicProduceData as TopicProduceDataV11
from kio.schema.produce.v11.response import ProduceResponse as ProduceResponseV11
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i16, i32

from tests.integration.test_transaction_verification import broker, new_topic  # noqa: F401 - broker is a fixture
from tests.kbus_processes import BrokerProcess
from tests.txn_forgery import (
    call,
    describe_transaction,
    end_txn,
    init_producer,
    produce_v12,
    transactional_batch,
    txn_offset_commit_v5,
)

pytestmark = pytest.mark.integration


def wait_state(b: BrokerProcess, tid: str, state: str) -> tuple[int, int, str]:
    deadline = time.monotonic() + 20
    while (now := describe_transaction(b.bootstrap, tid))[2] != state:
        assert time.monotonic() < deadline, now
        time.sleep(0.1)
    return now


def read_committed(b: BrokerProcess, topic: str, expected: int, timeout: float = 10) -> list[bytes]:
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "enable.partition.eof": True})  # fmt: skip
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    eof = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not (eof and len(out) >= expected):
        for m in c.consume(100, 0.3):
            if m.error() is None:
                out.append(m.value())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof = True
            else:
                raise AssertionError(m.error())
    c.close()
    return out


def test_api_versions_finalize_transaction_version_2(broker: BrokerProcess) -> None:  # noqa: F811
    r = call(broker.bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"),
             ApiVersionsResponse)
    assert [(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features] == [
        ("transaction.version", 2, 2)]
    assert r.finalized_features_epoch >= 0
    assert [(f.name, f.min_version, f.max_version) for f in r.supported_features] == [("transaction.version", 0, 2)]
    top = {int(k.api_key): int(k.max_version) for k in r.api_keys}
    assert (top[0], top[24], top[26], top[28]) == (12, 5, 5, 5)  # Produce, AddPartitionsToTxn, EndTxn, TxnOffsetCommit
    # before v4 a feature whose lowest level is 0 is not in the supported ones (KIP-1022); the finalized level is
    old = call(broker.bootstrap, ApiVersionsV3(client_software_name="t", client_software_version="1"),
               ApiVersionsV3Response)
    assert old.supported_features == () and len(old.finalized_features) == 1


def test_each_end_bumps_the_epoch_and_produce_v12_adds_the_partition(broker: BrokerProcess) -> None:  # noqa: F811
    topic, tid = new_topic(broker), f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    # no AddPartitionsToTxn: the Produce v12 itself adds the partition
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"one")) == "none"
    assert describe_transaction(broker.bootstrap, tid) == (pid, epoch, "Ongoing")
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True) == ("none", pid, epoch + 1)
    # a retry of that EndTxn (its answer lost) gets the same answer, not a new transaction's end
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True) == ("none", pid, epoch + 1)
    wait_state(broker, tid, "CompleteCommit")
    # the next transaction, at the new epoch, its sequence from 0 again; aborted
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch + 1, 0, b"two")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch + 1, commit=False) == ("none", pid, epoch + 2)
    assert wait_state(broker, tid, "CompleteAbort") == (pid, epoch + 2, "CompleteAbort")
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch + 2, 0, b"three")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch + 2, commit=True) == ("none", pid, epoch + 3)
    assert read_committed(broker, topic, 2) == [b"one", b"three"]


def test_the_old_epoch_is_fenced_after_each_transaction(broker: BrokerProcess) -> None:  # noqa: F811
    topic, tid = new_topic(broker), f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"kept")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True)[0] == "none"
    wait_state(broker, tid, "CompleteCommit")
    # a zombie still at the old epoch: its write is fenced by the partition (the commit marker carried epoch + 1)
    # and by the coordinator, and it cannot end a transaction
    zombie = transactional_batch(pid, epoch, 1, b"zombie")
    assert produce_v12(broker.bootstrap, tid, topic, zombie) == "invalid_producer_epoch"
    assert end_txn(broker.bootstrap, tid, pid, epoch - 1, commit=True)[0] == "producer_fenced"
    # an EndTxn commit at the current epoch with no transaction open is not a retry: INVALID_TXN_STATE, as in
    # Kafka 4 (only an abort may end a transaction that added nothing); an epoch past the current one is fenced
    assert end_txn(broker.bootstrap, tid, pid, epoch + 1, commit=True)[0] == "invalid_txn_state"
    assert end_txn(broker.bootstrap, tid, pid, epoch + 2, commit=True)[0] == "producer_fenced"
    assert read_committed(broker, topic, 1) == [b"kept"]
    # a new incarnation (InitProducerId) fences the current epoch too
    pid2, epoch2 = init_producer(broker.bootstrap, tid)
    assert (pid2, epoch2) == (pid, epoch + 2)
    old = transactional_batch(pid, epoch + 1, 0, b"old")
    assert produce_v12(broker.bootstrap, tid, topic, old) == "invalid_producer_epoch"


def test_produce_v11_still_needs_add_partitions(broker: BrokerProcess) -> None:  # noqa: F811
    """A transactions-v1 client's Produce (v11 and below) is verified, never adds: unchanged."""
    topic, tid = new_topic(broker), f"v1-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    r = call(broker.bootstrap, ProduceRequestV11(transactional_id=TransactionalId(tid), acks=i16(-1),
                                       timeout=datetime.timedelta(seconds=10),
                                       topic_data=(TopicProduceDataV11(name=TopicName(topic), partition_data=(
                                           PartitionProduceDataV11(index=i32(0),
                                                                   records=transactional_batch(pid, epoch)),)),)),
             ProduceResponseV11)
    assert r.responses[0].partition_responses[0].error_code.name == "transaction_abortable"
    # nothing was added: no transaction to end
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True)[0] == "invalid_txn_state"


def test_txn_offset_commit_v5_adds_the_offsets_partition(broker: BrokerProcess) -> None:  # noqa: F811
    topic, tid, group = new_topic(broker), f"v2-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"out")) == "none"

    def commit_offset(offset: int, at_epoch: int) -> str:
        return txn_offset_commit_v5(broker.bootstrap, tid, group, pid, at_epoch, topic, offset)

    # no AddOffsetsToTxn first
    assert commit_offset(7, epoch) == "none"
    _, _, state = describe_transaction(broker.bootstrap, tid)
    assert state == "Ongoing"
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True) == ("none", pid, epoch + 1)
    wait_state(broker, tid, "CompleteCommit")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert c.committed([TopicPartition(topic, 0)], 10)[0].offset == 7
    finally:
        c.close()
    # the old epoch cannot commit offsets any more
    assert commit_offset(9, epoch) in ("invalid_producer_epoch", "producer_fenced")


def test_implicit_add_racing_end_txn_never_leaves_a_record_outside_the_transaction(broker: BrokerProcess) -> None:  # noqa: F811
    """Review of issue 22: a Produce v12 to a partition new to the transaction, sent while the same transaction's
    EndTxn v5 commits it (on another connection), either joins the transaction (committed with it) or is refused
    (INVALID_PRODUCER_EPOCH once the epoch is bumped, INVALID_TXN_STATE if the marker beat its append; the
    coordinator's CONCURRENT_TRANSACTIONS is retried) — never a record the transaction does not end, which would
    hang the partition's last stable offset."""
    from concurrent.futures import ThreadPoolExecutor

    topic, racer_topic, tid = new_topic(broker), new_topic(broker), f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    joined: list[bytes] = []
    with ThreadPoolExecutor(2) as pool:
        for i in range(8):
            assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"in")) == "none"
            racer = f"racer-{i}".encode()
            end = pool.submit(end_txn, broker.bootstrap, tid, pid, epoch, True)
            if i % 2:
                time.sleep(0.002 * i)  # vary which side comes first
            produced = pool.submit(produce_v12, broker.bootstrap, tid, racer_topic,
                                   transactional_batch(pid, epoch, 0, racer)).result()
            assert end.result() == ("none", pid, epoch + 1)
            assert produced in ("none", "invalid_producer_epoch", "invalid_txn_state"), produced
            if produced == "none":
                joined.append(racer)
            epoch += 1
            wait_state(broker, tid, "CompleteCommit")
    # nothing left open on the racer's partition: a last transaction there is readable after what joined
    assert produce_v12(broker.bootstrap, tid, racer_topic, transactional_batch(pid, epoch, 0, b"last")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True)[0] == "none"
    assert read_committed(broker, racer_topic, len(joined) + 1) == [*joined, b"last"]


def _producer_state(b: BrokerProcess, topic: str, pid: int) -> tuple[int, int, int]:
    """(epoch, coordinator epoch, open transaction's first offset or -1) of `pid` on `topic`-0 (DescribeProducers)."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
    from kio.schema.describe_producers.v0.response import DescribeProducersResponse

    r = call(b.bootstrap, DescribeProducersRequest(topics=(TopicRequest(name=TopicName(topic),
                                                                        partition_indexes=(i32(0),)),)),
             DescribeProducersResponse)
    p = next(s for s in r.topics[0].partitions[0].active_producers if s.producer_id == pid)
    return int(p.producer_epoch), int(p.coordinator_epoch), int(p.current_txn_start_offset)


def _write_marker_v2(b: BrokerProcess, topic: str, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                     transaction_version: int) -> str:
    """WriteTxnMarkers v2 (as a Kafka 4 coordinator sends it, KIP-1228) for `topic`-0; the partition's error."""
    from kio.schema.types import ProducerId
    from kio.schema.write_txn_markers.v2 import request as v2
    from kio.schema.write_txn_markers.v2.response import WriteTxnMarkersResponse
    from kio.static.primitive import i8

    r = call(b.bootstrap, v2.WriteTxnMarkersRequest(markers=(v2.WritableTxnMarker(
        producer_id=ProducerId(pid), producer_epoch=i16(epoch), transaction_result=commit,
        coordinator_epoch=i32(coordinator_epoch), transaction_version=i8(transaction_version),
        topics=(v2.WritableTxnMarkerTopic(name=TopicName(topic), partition_indexes=(i32(0),)),)),)),
        WriteTxnMarkersResponse)
    return str(r.markers[0].topics[0].partitions[0].error_code.name)


def _second_transaction_open(b: BrokerProcess) -> tuple[str, str, int, int]:
    """(topic, transactional id, producer id, first epoch): "one" committed (its end bumped the epoch), then the
    next transaction's first batch "two" written at epoch + 1 and left open."""
    topic, tid = new_topic(b), f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(b.bootstrap, tid)
    assert produce_v12(b.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"one")) == "none"
    assert end_txn(b.bootstrap, tid, pid, epoch, commit=True) == ("none", pid, epoch + 1)
    wait_state(b, tid, "CompleteCommit")
    assert produce_v12(b.bootstrap, tid, topic, transactional_batch(pid, epoch + 1, 0, b"two")) == "none"
    return topic, tid, pid, epoch


def test_a_late_duplicate_marker_cannot_end_the_next_transaction(broker: BrokerProcess) -> None:  # noqa: F811
    """WriteTxnMarkers v2's transaction version (KIP-1228): with transactions v2 every marker carries the epoch
    its transaction's end bumped to, which the next transaction then writes with. A duplicate of the previous
    marker arriving after that transaction's first batch has the same epoch: Kafka refuses it
    (INVALID_PRODUCER_EPOCH) instead of letting it end part of the next transaction."""
    r = call(broker.bootstrap, ApiVersionsRequest(client_software_name="t", client_software_version="1"),
             ApiVersionsResponse)
    assert {int(k.api_key): int(k.max_version) for k in r.api_keys}[27] == 2
    topic, tid, pid, epoch = _second_transaction_open(broker)
    bumped, coordinator_epoch, open_at = _producer_state(broker, topic, pid)
    assert bumped == epoch + 1 and open_at == 2  # "one", its marker, then the open transaction
    # the first transaction's commit marker again, late
    late = _write_marker_v2(broker, topic, pid, epoch + 1, True, coordinator_epoch, transaction_version=2)
    assert late == "invalid_producer_epoch"
    assert _producer_state(broker, topic, pid)[2] == 2  # still open
    # the second transaction ends as its producer says: aborted
    assert end_txn(broker.bootstrap, tid, pid, epoch + 1, commit=False) == ("none", pid, epoch + 2)
    wait_state(broker, tid, "CompleteAbort")
    assert read_committed(broker, topic, 1) == [b"one"]


def test_the_coordinator_sends_the_transaction_version_to_other_leaders(broker: BrokerProcess) -> None:  # noqa: F811
    """A coordinator's markers for a partition another broker leads go as WriteTxnMarkers v2 with the transaction's
    version once that broker's ApiVersions has v2 (kbus.server.transaction.service.BrokerMarkerWriter): the late
    duplicate is refused there too, where v1 (no version) would have let it end the next transaction."""
    import asyncio

    from kbus.common.broker_config import KafkaConfig
    from kbus.common.cluster import BrokerInfo
    from kbus.protocol.client import PLAINTEXT
    from kbus.server.transaction.service import BrokerMarkerWriter

    host, port = broker.bootstrap.split(":")
    leader = BrokerInfo(broker_id=1, host=host, port=int(port))

    class Coordinator:  # the broker of another coordinator, as BrokerMarkerWriter sees its host
        config = KafkaConfig.from_properties({})
        broker_id = 99
        inter_broker_security = PLAINTEXT

        def partition_leader(self, topic: str, index: int) -> BrokerInfo:
            return leader

        def live_brokers(self) -> list[BrokerInfo]:
            return [leader]

    topic, tid, pid, epoch = _second_transaction_open(broker)
    _, coordinator_epoch, _ = _producer_state(broker, topic, pid)

    async def late_marker(transaction_version: int) -> int:
        writer = BrokerMarkerWriter(Coordinator(), 10_000, [], None)  # type: ignore[arg-type]
        try:
            errors = await writer.write_markers(pid, epoch + 1, True, coordinator_epoch, {(topic, 0)},
                                                transaction_version)
            return errors[(topic, 0)]
        finally:
            await writer.close()

    assert asyncio.run(late_marker(2)) == 47  # INVALID_PRODUCER_EPOCH

    async def two_at_once() -> list[int]:
        # transactions complete concurrently, each in its own task, and their markers may go to the same leader
        # over the writer's one connection to it: the second waits its turn (it raised "a request is already in
        # flight", which left its transaction in PrepareCommit)
        writer = BrokerMarkerWriter(Coordinator(), 10_000, [], None)  # type: ignore[arg-type]
        try:
            answers = await asyncio.gather(*(
                writer.write_markers(pid, epoch + 1, True, coordinator_epoch, {(topic, 0)}, 2) for _ in range(3)))
            return [answer[(topic, 0)] for answer in answers]
        finally:
            await writer.close()

    assert asyncio.run(two_at_once()) == [47, 47, 47]
    assert _producer_state(broker, topic, pid)[2] == 2  # the second transaction is still open
    assert end_txn(broker.bootstrap, tid, pid, epoch + 1, commit=True) == ("none", pid, epoch + 2)
    wait_state(broker, tid, "CompleteCommit")
    assert read_committed(broker, topic, 2) == [b"one", b"two"]


def test_each_transaction_starts_its_sequence_at_0(broker: BrokerProcess) -> None:  # noqa: F811
    """Kafka 4 (checked against Apache Kafka 4.4 with these frames): the first batch of a v2 transaction on a
    partition must have sequence 0, both where the last transaction's marker bumped the producer's epoch (its
    batches gone) and where the producer never wrote: a later batch arriving first is OUT_OF_ORDER_SEQUENCE_NUMBER
    (retriable for the client), not written ahead of its predecessor."""
    topic, other, tid = new_topic(broker), new_topic(broker), f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"one")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True)[0] == "none"
    wait_state(broker, tid, "CompleteCommit")
    epoch += 1
    late = transactional_batch(pid, epoch, 3, b"late")
    assert produce_v12(broker.bootstrap, tid, topic, late) == "out_of_order_sequence_number"
    assert produce_v12(broker.bootstrap, tid, other, late) == "out_of_order_sequence_number"
    assert produce_v12(broker.bootstrap, tid, topic, transactional_batch(pid, epoch, 0, b"two")) == "none"
    assert produce_v12(broker.bootstrap, tid, other, transactional_batch(pid, epoch, 0, b"two")) == "none"
    assert end_txn(broker.bootstrap, tid, pid, epoch, commit=True)[0] == "none"
    wait_state(broker, tid, "CompleteCommit")
    assert read_committed(broker, topic, 2) == [b"one", b"two"]
    assert read_committed(broker, other, 1) == [b"two"]


def test_a_retried_init_producer_id_gets_the_same_epoch(broker: BrokerProcess) -> None:  # noqa: F811
    """KIP-360's InitProducerId with the producer's id and epoch, retried after its answer was lost: Kafka answers
    the epoch it bumped to again (the given epoch is the last one), not PRODUCER_FENCED."""
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
    from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
    from kio.schema.types import ProducerId

    tid = f"v2-{uuid.uuid4().hex[:6]}"
    pid, epoch = init_producer(broker.bootstrap, tid)

    def reinit(at_epoch: int) -> tuple[str, int, int]:
        r = call(broker.bootstrap, InitProducerIdRequest(
            transactional_id=TransactionalId(tid), transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=ProducerId(pid), producer_epoch=i16(at_epoch)), InitProducerIdResponse)
        return r.error_code.name, int(r.producer_id), int(r.producer_epoch)

    assert reinit(epoch) == ("none", pid, epoch + 1)
    assert reinit(epoch) == ("none", pid, epoch + 1)  # the retry
    assert reinit(epoch + 1) == ("none", pid, epoch + 2)
    assert reinit(epoch)[0] == "producer_fenced"  # older than the last bump
