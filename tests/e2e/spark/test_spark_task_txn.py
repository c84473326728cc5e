"""The exactly-once task write (kbus/spark/task_txn.py) against a real broker, without Spark: the task's partition
and write id, which Spark's TaskContext gives, are set by the test. Seconds, where a Spark job takes a minute."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kbus.spark import task_txn
from kbus.spark.options import SinkOptions
from kbus.spark.task_txn import WriteId, marker_group, write_partition
from tests.e2e.spark.helpers import create_topic
from tests.e2e.spark.test_spark_exactly_once import read_committed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _task(monkeypatch: pytest.MonkeyPatch, partition: int) -> None:
    monkeypatch.setattr(task_txn, "current_write",
                        lambda save_id: (partition, WriteId(f"save:{save_id}", 0, streaming=False)))


def _options(bootstrap: str, topic: str, sink_id: str) -> SinkOptions:
    return SinkOptions(client_config={"bootstrap.servers": bootstrap, "transactional.id": sink_id}, topic=topic,
                       transaction_scope="task")


def _marker_offset(bootstrap: str, topic: str, sink_id: str, partition: int) -> int:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": marker_group(sink_id, partition),
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        return int(c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset)
    finally:
        c.close()


def test_task_commit_publishes_every_record_and_a_retry_writes_nothing(broker, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The records are not flushed before the marker joins the transaction: commit_transaction must deliver them all.
    topic, sink_id = f"task-txn-{uuid.uuid4().hex[:6]}", f"sink-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 3)
    _task(monkeypatch, 2)
    rows = [pa.RecordBatch.from_pydict({"key": [f"k{i}" for i in range(s, s + 5000)],
                                        "value": [f"v{i}" for i in range(s, s + 5000)]}) for s in range(0, 20000, 5000)]
    first = write_partition(iter(rows), _options(broker.bootstrap, topic, sink_id), "save-1")
    assert (first.partition, first.records, first.written) == (2, 20000, True)
    assert sorted(read_committed(broker.bootstrap, topic, 3)) == sorted(f"v{i}".encode() for i in range(20000))
    assert _marker_offset(broker.bootstrap, topic, sink_id, 2) == 1
    again = write_partition(iter(rows), _options(broker.bootstrap, topic, sink_id), "save-1")  # a retried attempt
    assert (again.records, again.written) == (20000, False)
    assert len(read_committed(broker.bootstrap, topic, 3)) == 20000


def test_task_with_a_failed_delivery_fails_and_leaves_nothing_visible(broker, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    topic, sink_id = f"task-txn-err-{uuid.uuid4().hex[:6]}", f"sink-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1, config={"max.message.bytes": "1000"})
    _task(monkeypatch, 0)
    batch = pa.RecordBatch.from_pydict({"value": ["small", "x" * 5000, "small too"]})  # the broker refuses one
    with pytest.raises(KafkaException):
        write_partition(iter([batch]), _options(broker.bootstrap, topic, sink_id), "save-1")
    assert read_committed(broker.bootstrap, topic, 1) == []
    assert _marker_offset(broker.bootstrap, topic, sink_id, 0) < 0  # no marker: a retry writes the rows
