"""Exactly-once writes from the tasks (`kafka.transactional.id`, transactionScope=task, the default).

Each task writes its Spark partition p of micro-batch N in its own Kafka transaction, with the transactional id
`<sink id>-<p>`, and commits inside that same transaction a marker: the offset N + 1 of the consumer group
`kbus-sink-<sink id>-<p>` on partition 0 of the output topic, whose metadata names the query, the batch and the
rows (count and digest). Every attempt of the task first calls InitProducerId for its transactional id, which
fences (and aborts the open transaction of) any older attempt still running: a zombie, a speculative twin, the
task of a driver that was killed. Then it reads the marker with read_committed (OffsetFetch require_stable, so a
commit still in flight is waited for, never read half-done): when batch N is already there, the task writes
nothing and only checks that its rows are the ones written (the same count and digest), else the query's output is
not deterministic and the task fails rather than write a different set. docs/spark.md gives the conditions.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain

import pyarrow as pa
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from kbus.spark.options import SinkOptions
from kbus.spark.produce import RowDigest, init_transactions, new_producer, produce_batches

# A task's transaction stays open while it writes; longer than transaction.timeout.ms and the coordinator aborts it
# (librdkafka's default is 60 s; Kafka's transaction.max.timeout.ms default is 15 min).
DEFAULT_TRANSACTION_TIMEOUT_MS = 300_000
_BATCH_ID = "streaming.sql.batchId"  # local properties Spark's MicroBatchExecution gives every task of a batch
_QUERY_ID = "sql.streaming.queryId"  # the query's id: kept in the checkpoint, the same after a restart
_MARKER_VERSION = 1


class KbusSinkError(RuntimeError):
    """The exactly-once sink refuses to write: doing so could write a record twice or lose one."""


@dataclass(frozen=True)
class WriteId:
    """Whose output a marker records: a streaming query (`owner` = its id) and micro-batch, or one save()."""

    owner: str
    batch: int
    streaming: bool


@dataclass
class TaskWrite(WriterCommitMessage):
    partition: int
    records: int
    written: bool  # False: an earlier attempt (or run) of the task had committed these rows


@dataclass(frozen=True)
class Marker:
    owner: str
    batch: int
    records: int
    digest: int

    def metadata(self) -> str:
        return json.dumps({"kbus-sink": _MARKER_VERSION, "owner": self.owner, "batch": self.batch,
                           "records": self.records, "digest": self.digest}, separators=(",", ":"))

    @classmethod
    def parse(cls, offset: int, metadata: str | None) -> Marker | None:
        """The marker of a committed offset; None when nothing was committed. Raises on an offset committed by
        anything else (the driver-side mode, a consumer using the sink's group name)."""
        if offset < 0:
            return None
        try:
            data = json.loads(metadata or "")
            if data.get("kbus-sink") != _MARKER_VERSION:
                raise ValueError
            return cls(str(data["owner"]), int(data["batch"]), int(data["records"]), int(data["digest"]))
        except (ValueError, TypeError, KeyError, AttributeError):
            raise KbusSinkError(f"the sink's marker group holds offset {offset} with metadata {metadata!r}, not a "
                                "kbus task marker: another writer uses this sink id") from None


def marker_group(sink_id: str, partition: int) -> str:
    return f"kbus-sink-{sink_id}-{partition}"


def task_transactional_id(sink_id: str, partition: int) -> str:
    return f"{sink_id}-{partition}"


def current_write(save_id: str | None) -> tuple[int, WriteId]:
    """(Spark partition, what is being written) for the running task: the micro-batch from Spark's local
    properties, or the save() the driver named."""
    ctx = TaskContext.get()
    if ctx is None:
        raise KbusSinkError("the exactly-once sink must run inside a Spark task")
    batch, query = ctx.getLocalProperty(_BATCH_ID), ctx.getLocalProperty(_QUERY_ID)
    if save_id is not None:
        return ctx.partitionId(), WriteId(f"save:{save_id}", 0, streaming=False)
    if batch is None or query is None:
        raise KbusSinkError("Spark gave the streaming write no batch id / query id (local properties "
                            f"{_BATCH_ID}, {_QUERY_ID})")
    return ctx.partitionId(), WriteId(f"query:{query}", int(batch), streaming=True)


def _consumer_config(client_config: dict[str, str], group: str) -> dict[str, str | bool]:
    base = {k: v for k, v in client_config.items()
            if k.startswith(("bootstrap.", "security.", "sasl.", "ssl.", "client.", "socket."))}
    return {**base, "group.id": group, "isolation.level": "read_committed", "enable.auto.commit": False}


def write_partition(batches: Iterator[pa.RecordBatch], options: SinkOptions, save_id: str | None) -> TaskWrite:
    """Write this task's rows exactly once (see the module docstring)."""
    partition, write = current_write(save_id)
    rows = iter(batches)
    first = next((b for b in rows if b.num_rows), None)
    if first is None:
        return TaskWrite(partition, 0, written=False)  # nothing to write: no transaction, no marker
    rows = chain([first], rows)
    topic = options.topic if options.topic is not None else first.column("topic")[0].as_py()
    marker_tp = TopicPartition(topic, 0)
    config = {"transaction.timeout.ms": str(DEFAULT_TRANSACTION_TIMEOUT_MS),
              **options.client_config, "transactional.id": task_transactional_id(options.sink_id, partition)}
    timeout_ms = int(config["transaction.timeout.ms"])
    producer, deliveries = new_producer(config)
    consumer = Consumer(_consumer_config(options.client_config, marker_group(options.sink_id, partition)))
    started = time.monotonic()
    try:
        init_transactions(producer, topic)  # fences every older attempt of this task, aborts its open transaction
        # only then the marker: read before the fence, an older attempt could still commit it after the read
        committed = consumer.committed([marker_tp], timeout=60)[0]
        previous = Marker.parse(committed.offset, committed.metadata)
        if previous is not None and previous.owner == write.owner and previous.batch >= write.batch:
            if previous.batch == write.batch:
                _check_replay(rows, previous, partition)
            return TaskWrite(partition, previous.records if previous.batch == write.batch else 0, written=False)
        if previous is not None and previous.owner != write.owner and write.streaming:
            raise KbusSinkError(
                f"sink id {options.sink_id!r}: partition {partition} was last written by {previous.owner} "
                f"(batch {previous.batch}), not by this query ({write.owner}). Two queries cannot share a sink "
                "id; a query restarted without its checkpoint is a new query and needs a new "
                "kafka.transactional.id (or delete the consumer groups "
                f"{marker_group(options.sink_id, 0)}..)")
        producer.begin_transaction()
        digest = RowDigest()
        # no flush of its own: the marker goes into the transaction while the last records are in flight, and
        # commit_transaction flushes them (failing, so the transaction aborts, if any delivery failed)
        produce_batches(rows, options.topic, producer, deliveries, digest=digest, flush=False)
        marker = Marker(write.owner, write.batch, digest.records, digest.digest)
        done = TopicPartition(topic, 0, write.batch + 1, metadata=marker.metadata())
        producer.send_offsets_to_transaction([done], consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(120)
        if deliveries.first_error is not None:  # cannot follow a successful commit; checked all the same
            raise KafkaException(deliveries.first_error)
        return TaskWrite(partition, digest.records, written=True)
    except BaseException as exc:
        # An upstream error mid-write, a failed delivery, a fenced attempt: abort now rather than leave the open
        # transaction to the next attempt's InitProducerId (or, if none comes, to transaction.timeout.ms).
        with contextlib.suppress(KafkaException):  # fenced, or nothing open
            producer.abort_transaction(30)
        elapsed_ms = (time.monotonic() - started) * 1000
        if isinstance(exc, KafkaException) and elapsed_ms >= timeout_ms:
            raise KbusSinkError(
                f"partition {partition}: the task's transaction ran {elapsed_ms / 1000:.0f} s, longer than "
                f"transaction.timeout.ms={timeout_ms}, so the coordinator aborted it ({exc}). Raise "
                "kafka.transaction.timeout.ms (at most the brokers' transaction.max.timeout.ms) or write less per "
                "task (maxOffsetsPerTrigger, more partitions)") from exc
        raise
    finally:
        consumer.close()


def _check_replay(rows: Iterator[pa.RecordBatch], marker: Marker, partition: int) -> None:
    digest = RowDigest()
    digest.add_batches(rows)
    if (digest.records, digest.digest) != (marker.records, marker.digest):
        raise KbusSinkError(
            f"batch {marker.batch}, partition {partition} was written with {marker.records} rows (digest "
            f"{marker.digest:x}) and is now replayed with {digest.records} rows (digest {digest.digest:x}): the "
            "query does not give a replayed batch the same rows per partition (a non-deterministic expression, "
            "a changed number of partitions or code), so writing it could duplicate or lose records")
