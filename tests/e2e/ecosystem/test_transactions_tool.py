"""`kbus transactions` beside Kafka 3.9's own kafka-transactions.sh (TransactionsCommand) on the same kbus broker:
the same tables byte for byte (the duration column aside), and both able to find and abort a hanging
transaction."""

from __future__ import annotations

import asyncio
import datetime
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse

from kbus.protocol import record_batch as rb
from kbus.protocol.client import KafkaConnection
from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

KBUS = str(Path(sys.executable).parent / "kbus")


def kbus(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([KBUS, *args], capture_output=True, text=True, timeout=60)


def table(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.splitlines()]


def hanging_batch(bootstrap: str, topic: str, producer_id: int) -> None:
    """A transactional batch no coordinator knows of (as a crashed, half-upgraded or buggy client leaves one). Kafka
    3.9 refuses one unless transaction verification is off (KIP-890), so it is switched off for this write, as an
    operator would have to on Kafka to make one."""
    batch = rb.build_batch(
        [(b"k", b"hanging")], producer_id=producer_id, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    host, port = bootstrap.split(":")
    request = ProduceRequest(
        transactional_id="no-such-transaction",  # Kafka wants one (and Write on it) with transactional records
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),),
    )

    async def send() -> int:
        conn = KafkaConnection(host, int(port), "hanging")
        try:
            resp = await conn.request(request, ProduceResponse)
        finally:
            await conn.close()
        return int(resp.responses[0].partition_responses[0].error_code)

    verification = ("configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "brokers",
                    "--entity-default")
    done = kbus(*verification, "--add-config", "transaction.partition.verification.enable=false")
    assert done.returncode == 0, done.stderr
    try:
        deadline = time.monotonic() + 20
        while (error := asyncio.run(send())) != 0 and time.monotonic() < deadline:
            time.sleep(0.2)  # until the broker applied the dynamic config
        assert error == 0
    finally:
        kbus(*verification, "--delete-config", "transaction.partition.verification.enable")


def test_same_tables_as_kafka_transactions(kafka39: KafkaDistribution, broker: BrokerProcess) -> None:
    bs = broker.bootstrap
    topic, tid = f"ktx-{uuid.uuid4().hex[:6]}", f"ktx-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": bs, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush()

    def both(*args: str) -> tuple[list[list[str]], list[list[str]]]:
        ours = kbus("transactions", "--bootstrap-server", bs, *args)
        theirs = kafka39.run("kafka-transactions", "--bootstrap-server", bs, *args)
        assert ours.returncode == 0, ours.stderr
        assert theirs.returncode == 0, theirs.stderr
        return table(ours.stdout), table(theirs.stdout)

    ours, theirs = both("list")
    # the header is padded to the longest transactional id on the shared broker (the Java and Streams tests' ids
    # are longer than the header), so its cells are compared without their padding too
    assert [c.strip() for c in ours[0]] == [c.strip() for c in theirs[0]] == [
        "TransactionalId", "Coordinator", "ProducerId", "TransactionState", ""]  # fmt: skip
    # other tests' transactions share the broker and may change state between the two calls, which changes
    # column widths: compare this id's cells without their padding (padding is compared for describe below)
    def cells(rows: list[list[str]]) -> list[list[str]]:
        return [[c.strip() for c in r] for r in rows if r[0].strip() == tid]

    assert cells(ours) == cells(theirs) and len(cells(ours)) == 1
    ours, theirs = both("describe", "--transactional-id", tid)
    duration = theirs[0].index("TransactionDurationMs")
    for row in (*ours, *theirs):
        del row[duration]
    assert ours == theirs
    assert ours[1][4].strip() == "Ongoing" and ours[1][-2].strip() == f"{topic}-0"
    ours, theirs = both("describe-producers", "--topic", topic, "--partition", "0")
    assert ours == theirs and ours[1][-2].strip() == "0"  # CurrentTransactionStartOffset

    hanging_batch(bs, topic, producer_id=987_654)
    for tool in ("kbus", "kafka"):
        args = ("find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
        out = (
            kbus("transactions", "--bootstrap-server", bs, *args)
            if tool == "kbus"
            else kafka39.run("kafka-transactions", "--bootstrap-server", bs, *args)
        )
        rows = table(out.stdout)
        assert [r[2].strip() for r in rows[1:]] == ["987654"], (tool, out.stdout, out.stderr)
    aborted = kbus(
        "transactions", "--bootstrap-server", bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "1"
    )
    assert aborted.returncode == 0, aborted.stderr
    p.commit_transaction(30)
    ours, _ = both("describe-producers", "--topic", topic, "--partition", "0")
    assert all(r[-2].strip() == "None" for r in ours[1:])  # no open transaction is left on the partition


def test_errors_are_one_line(broker: BrokerProcess) -> None:
    out = kbus("transactions", "--bootstrap-server", broker.bootstrap, "describe", "--transactional-id", "nope")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "Failed to describe transaction state of transactional-id `nope`: "
        "DescribeTransactions request for transactionalId `nope` failed because the ID "
        "could not be found"
    )
    out = kbus("transactions", "--bootstrap-server", broker.bootstrap, "describe")
    assert out.returncode != 0 and out.stderr.strip() == "argument --transactional-id is required"


def test_dump_log_shows_markers_and_txnindex_like_kafka(kafka39: KafkaDistribution, broker: BrokerProcess) -> None:
    bs, topic = broker.bootstrap, f"kdl-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for commit in (True, False, True):
        p.begin_transaction()
        p.produce(topic, b"v", key=b"k", partition=0)
        p.commit_transaction(30) if commit else (p.flush(), p.abort_transaction(30))
    segment = broker.log_dirs / f"{topic}-0" / "00000000000000000000.log"
    outputs = []
    for f, extra in ((segment, ("--deep-iteration", "--print-data-log")), (segment.with_suffix(".txnindex"), ())):
        ours = kbus("dump-log", *extra, "--files", str(f))
        theirs = kafka39.run("kafka-dump-log", *extra, "--files", str(f))
        assert ours.returncode == theirs.returncode == 0, ours.stderr + theirs.stderr
        assert ours.stdout == theirs.stdout
        outputs.append(ours.stdout)
    assert outputs[0].count("endTxnMarker: COMMIT") == 2 and outputs[0].count("endTxnMarker: ABORT") == 1
    assert kbus("dump-log", "--files", str(segment.with_suffix(".txnindex"))).stdout.count("producerId:") == 1
