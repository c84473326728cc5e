"""Transactions with real clients against a real kbus broker: confluent-kafka's transactional producer,
read_committed consumers, the LSO, fencing and the abort of timed-out transactions."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

TXN_BROKER = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    b = BrokerProcess(tmp_path_factory.mktemp("txn-broker"), dict(TXN_BROKER)).start()
    yield b
    b.stop()


def topic_name() -> str:
    return f"txn-{uuid.uuid4().hex[:10]}"


def producer(bootstrap: str, tid: str, **extra: object) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read(bootstrap: str, topic: str, isolation: str, expected: int, timeout: float = 20, **conf: object
         ) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "enable.partition.eof": True, "fetch.wait.max.ms": 100, **conf})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    eof = False
    while time.monotonic() < deadline and not (eof and len(out) >= expected):
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
                    continue
                raise KafkaException(m.error())
            out.append(m.value())
    c.close()
    return out


def test_commit_and_abort(txn_broker: BrokerProcess) -> None:
    bs, topic = txn_broker.bootstrap, topic_name()
    p = producer(bs, f"tx-{topic}")
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"committed-{i}".encode())
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"aborted-{i}".encode())
    p.flush()
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed-5")
    p.commit_transaction(30)
    committed = read(bs, topic, "read_committed", 6)
    assert committed == [f"committed-{i}".encode() for i in range(6)]
    everything = read(bs, topic, "read_uncommitted", 9)
    assert len(everything) == 9 and b"aborted-0" in everything


def test_read_committed_over_one_record_batches_in_small_fetches(txn_broker: BrokerProcess) -> None:
    # linger.ms=0 leaves one batch per record; 700-byte fetches end mid-transaction and next to markers, so each
    # fetch's range ends and aborted-transaction list are computed many times over (kbus.server.log.segment.read)
    bs, topic = txn_broker.bootstrap, topic_name()
    p = producer(bs, f"tx-{topic}", **{"linger.ms": 0, "batch.num.messages": 1})
    committed: list[bytes] = []
    for t in range(6):
        p.begin_transaction()
        values = [f"{t}-{i}".encode() for i in range(30)]
        for v in values:
            p.produce(topic, v)
        p.flush()
        if t % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            committed += values
    assert read(bs, topic, "read_committed", len(committed), **{"max.partition.fetch.bytes": 700}) == committed
    assert len(read(bs, topic, "read_uncommitted", 180, **{"max.partition.fetch.bytes": 700})) == 180


def test_open_transaction_holds_back_read_committed(txn_broker: BrokerProcess) -> None:
    bs, topic = txn_broker.bootstrap, topic_name()
    p = producer(bs, f"tx-{topic}")
    p.begin_transaction()
    p.produce(topic, b"in-txn")
    p.flush()
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, b"after")
    plain.flush()
    assert read(bs, topic, "read_committed", 1, timeout=3) == []  # the LSO sits at the open transaction
    assert read(bs, topic, "read_uncommitted", 2) == [b"in-txn", b"after"]
    p.commit_transaction(30)
    assert read(bs, topic, "read_committed", 2) == [b"in-txn", b"after"]


def test_second_producer_fences_the_first(txn_broker: BrokerProcess) -> None:
    bs, topic = txn_broker.bootstrap, topic_name()
    tid = f"tx-{topic}"
    p1 = producer(bs, tid)
    p1.begin_transaction()
    p1.produce(topic, b"zombie")
    p1.flush()
    p2 = producer(bs, tid)  # aborts p1's open transaction and bumps the epoch
    p2.begin_transaction()
    p2.produce(topic, b"live")
    p2.commit_transaction(30)
    with pytest.raises(KafkaException) as info:
        p1.produce(topic, b"zombie-2")
        p1.commit_transaction(10)
    assert info.value.args[0].fatal() or "fenced" in str(info.value).lower()
    assert read(bs, topic, "read_committed", 1) == [b"live"]


def test_transaction_of_a_killed_producer_times_out(txn_broker: BrokerProcess) -> None:
    bs, topic = txn_broker.bootstrap, topic_name()
    script = textwrap.dedent(f"""
        import os, signal
        from confluent_kafka import Producer
        p = Producer({{"bootstrap.servers": "{bs}", "transactional.id": "tx-{topic}",
                      "transaction.timeout.ms": 2000}})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("{topic}", b"orphan")
        p.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], timeout=60)
    assert proc.returncode == -9
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, b"later")
    plain.flush()
    # the coordinator aborts the orphan after 2 s; the LSO then passes it and only "later" is visible
    assert read(bs, topic, "read_committed", 1, timeout=20) == [b"later"]


def test_consume_transform_produce_commits_offsets_in_the_transaction(txn_broker: BrokerProcess) -> None:
    bs, source, sink = txn_broker.bootstrap, topic_name(), topic_name()
    plain = Producer({"bootstrap.servers": bs})
    for i in range(10):
        plain.produce(source, f"in-{i}".encode())
    plain.flush()
    group = f"g-{source}"

    def consumer() -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
        c.subscribe([source])
        return c

    def process(c: Consumer, p: Producer, n: int, commit: bool) -> None:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got.extend(m for m in c.consume(n - len(got), 0.5) if not m.error())
        assert len(got) == n
        p.begin_transaction()
        for m in got:
            p.produce(sink, m.value().replace(b"in", b"out"))
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)

    p = producer(bs, f"tx-{source}")
    c = consumer()
    process(c, p, 6, commit=True)
    c.close()
    c = consumer()  # resumes after the 6 committed in the transaction
    process(c, p, 4, commit=False)  # aborted: neither output nor offsets count
    c.close()
    c = consumer()
    process(c, p, 4, commit=True)  # the same 4 again
    c.close()
    assert read(bs, sink, "read_committed", 10) == [f"out-{i}".encode() for i in range(10)]


def test_broker_killed_mid_transaction_then_restarted(tmp_path_factory: pytest.TempPathFactory) -> None:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-kill"), dict(TXN_BROKER)).start()
    try:
        bs, topic = b.bootstrap, topic_name()
        p = producer(bs, f"tx-{topic}", **{"message.timeout.ms": 60000})
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, f"in-flight-{i}".encode())
        assert p.flush(30) == 0
        b.kill()
        b.start()  # same port, same data: the coordinator reloads the Ongoing transaction from its log
        p.commit_transaction(60)
        p.begin_transaction()
        p.produce(topic, b"after-restart")
        p.commit_transaction(60)
        got = read(b.bootstrap, topic, "read_committed", 21)
        assert got == [f"in-flight-{i}".encode() for i in range(20)] + [b"after-restart"]
    finally:
        b.stop()


def test_aiokafka_transactional_producer(txn_broker: BrokerProcess) -> None:
    import asyncio

    from aiokafka import AIOKafkaProducer

    bs, topic = txn_broker.bootstrap, topic_name()

    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"aio-{topic}")
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-aborted")
            await p.abort_transaction()
        finally:
            await p.stop()

    asyncio.run(go())
    assert read(bs, topic, "read_committed", 1) == [b"aio-committed"]
    assert read(bs, topic, "read_uncommitted", 2) == [b"aio-committed", b"aio-aborted"]


def test_task_marker_of_the_spark_sink(txn_broker: BrokerProcess) -> None:
    """What kbus's exactly-once Spark sink (kbus/spark/task_txn.py) relies on: a task's rows and its marker (a
    transactional offset commit of the task's own group) are committed or aborted together; a read_committed
    OffsetFetch (require_stable) never answers while the marker's transaction is undecided; a second
    InitProducerId for the same transactional id (a retried or speculative attempt) aborts the first attempt's
    rows AND marker and fences it; the marker's metadata comes back as committed. And why the marker sits on
    partition 0: a committed offset for a partition the topic does not have is refused, as in Kafka."""
    bs, topic = txn_broker.bootstrap, topic_name()
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, b"create")
    plain.flush()
    tid, group = f"{topic}-3", f"kbus-sink-{topic}-3"
    markers = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                        "enable.auto.commit": False})
    marker_tp = TopicPartition(topic, 0)

    def marker(timeout: float = 20) -> tuple[int, str | None]:
        tp = markers.committed([marker_tp], timeout=timeout)[0]
        return tp.offset, tp.metadata

    first = producer(bs, tid)
    first.begin_transaction()
    first.produce(topic, b"attempt-0")
    first.send_offsets_to_transaction([TopicPartition(topic, 0, 1, metadata="batch 0, attempt 0")],
                                      markers.consumer_group_metadata(), 30)
    with pytest.raises(KafkaException):  # undecided: UNSTABLE_OFFSET_COMMIT until it is, so no answer in 3 s
        marker(timeout=3)
    second = producer(bs, tid)  # fences attempt 0: its record and its marker are aborted
    assert marker()[0] < 0  # nothing committed: attempt 1 must write
    second.begin_transaction()
    second.produce(topic, b"attempt-1")
    second.send_offsets_to_transaction([TopicPartition(topic, 0, 1, metadata='{"batch":0}')],
                                       markers.consumer_group_metadata(), 30)
    second.commit_transaction(30)
    with pytest.raises(KafkaException):
        first.commit_transaction(10)
    assert marker() == (1, '{"batch":0}')
    third = producer(bs, tid)  # a later attempt: the marker says batch 0 is written
    assert marker() == (1, '{"batch":0}')
    third.begin_transaction()
    with pytest.raises(KafkaException) as info:
        third.send_offsets_to_transaction([TopicPartition(topic, 5, 1)], markers.consumer_group_metadata(), 30)
    assert info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, info.value
    markers.close()
    assert read(bs, topic, "read_committed", 2) == [b"create", b"attempt-1"]
