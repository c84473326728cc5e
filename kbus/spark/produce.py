"""Executor side of a write: Arrow record batches -> produce requests through confluent-kafka.

Columns, as in Spark's Kafka sink: value (required), key, topic (the `topic` option overrides it), partition,
headers. Delivery is at least once, like Spark's sink; any delivery error fails the task.

Exactly once (a kbus extension; set `kafka.transactional.id`): by default each task writes in its own transaction
(kbus/spark/task_txn.py). With transactionScope=batch, tasks do not produce; they hand their rows to the driver as
Arrow IPC bytes, and the driver's commit writes the whole micro-batch in ONE Kafka transaction together with a
marker, the offset `batchId + 1` committed for the group `kbus-sink-<transactional.id>`. A micro-batch that Spark
replays after a crash (its commit not yet in the checkpoint) finds its marker and is not written again; one
interrupted mid-write is aborted when the restarted query's producer fences the old one. The price: a
micro-batch's output passes through the driver, so bound it (maxOffsetsPerTrigger).
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructType

from kbus.spark.options import KbusOptionError

# The Java producer's partitioner, so a key lands in the same partition whether Spark or a Java client wrote it.
# Delivery reports only for failures: a task only needs to know that one failed, and a report per record (a Python
# callback and a message object each) cost about a fifth of a writing task's CPU.
_PRODUCE_DEFAULTS: dict[str, str | int | bool] = {"partitioner": "murmur2_random", "linger.ms": 5,
                                                  "delivery.report.only.error": True}

_BYTES_OR_STRING = (BinaryType, StringType)


@dataclass
class ProduceSummary(WriterCommitMessage):
    records: int


def check_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Fail at planning time, with the column named, rather than inside every task."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise KbusOptionError("the data to write needs a 'value' column (string or binary)")
    if not isinstance(fields["value"], _BYTES_OR_STRING):
        raise KbusOptionError(f"column 'value' must be string or binary, not {fields['value'].simpleString()}")
    if "key" in fields and not isinstance(fields["key"], _BYTES_OR_STRING):
        raise KbusOptionError(f"column 'key' must be string or binary, not {fields['key'].simpleString()}")
    if topic_option is None:
        if "topic" not in fields:
            raise KbusOptionError("no topic to write to: set option 'topic' or provide a 'topic' column")
        if not isinstance(fields["topic"], StringType):
            raise KbusOptionError(f"column 'topic' must be string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], (IntegerType, LongType)):
        raise KbusOptionError(f"column 'partition' must be int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, ArrayType)
            and isinstance(h.elementType, StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise KbusOptionError(
                f"column 'headers' must be array<struct<key:string,value:binary>>, not {h.simpleString()}"
            )


@dataclass
class StagedRows(WriterCommitMessage):
    """One task's rows for an exactly-once write, as an Arrow IPC stream (empty when the task had none)."""

    ipc: bytes
    records: int


def stage_batches(batches: Iterator[pa.RecordBatch]) -> StagedRows:
    sink = pa.BufferOutputStream()
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    records = 0
    for batch in batches:
        if writer is None:
            writer = pa.ipc.new_stream(sink, batch.schema)
        writer.write_batch(batch)
        records += batch.num_rows
    if writer is None:
        return StagedRows(b"", 0)
    writer.close()
    return StagedRows(sink.getvalue().to_pybytes(), records)


def _unstage(staged: Sequence[object]) -> Iterator[pa.RecordBatch]:
    for message in staged:
        if isinstance(message, StagedRows) and message.ipc:
            yield from pa.ipc.open_stream(message.ipc)


def _marker_partition(staged: Sequence[object], topic: str | None) -> TopicPartition | None:
    if topic is not None:
        return TopicPartition(topic, 0)
    for batch in _unstage(staged):
        if batch.num_rows:
            return TopicPartition(batch.column("topic")[0].as_py(), 0)
    return None


def produce_transaction(staged: Sequence[object], client_config: dict[str, str], topic: str | None,
                        batch_id: int | None) -> int:
    """Write every staged row in one transaction (driver side). With a batch id, skip a micro-batch whose
    transaction already committed (see the module docstring); returns the rows written."""
    tid = client_config["transactional.id"]
    marker = _marker_partition(staged, topic)
    if marker is None:
        return 0  # nothing to write, nothing to remember
    group = f"kbus-sink-{tid}"
    consumer_config = {k: v for k, v in client_config.items()
                       if k.startswith(("bootstrap.", "security.", "sasl.", "ssl.", "client."))}
    consumer = Consumer({**consumer_config, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    producer, deliveries = new_producer(client_config)
    try:
        init_transactions(producer, marker.topic)  # fences (and aborts) a transaction a killed driver left open
        if batch_id is not None:
            committed = consumer.committed([marker], timeout=60)[0].offset
            if committed >= batch_id + 1:
                return 0  # this micro-batch's transaction committed before the crash: never write it twice
        producer.begin_transaction()
        count = produce_batches(_unstage(staged), topic, producer, deliveries)
        if batch_id is not None:
            done = TopicPartition(marker.topic, marker.partition, batch_id + 1,
                                  metadata=f"kbus spark sink batch {batch_id}")
            producer.send_offsets_to_transaction([done], consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(120)
        return count
    except BaseException:
        with contextlib.suppress(KafkaException):  # fenced, or nothing open: the next init_transactions cleans up
            producer.abort_transaction(30)
        raise
    finally:
        consumer.close()


class Deliveries:
    """The producer's delivery callback (one per producer, not per record): remembers the first failure."""

    def __init__(self) -> None:
        self.first_error: KafkaError | None = None
        self.failed = 0

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failed += 1
            self.first_error = self.first_error or err


def init_transactions(producer: Producer, topic: str, timeout: float = 60) -> None:
    """InitProducerId for a new transactional producer (fencing the older producers of its transactional id), after
    a metadata request for the topic it is about to write. Why that request first: librdkafka drops its bootstrap
    connection once the metadata names the brokers, and a transaction manager that starts before the named broker's
    connection is up finds no broker and retries its coordinator lookup on a 500 ms timer: about half of the
    exactly-once tasks waited 0.5-0.8 s there (bench/notes/spark_write.md). With a connection up, InitProducerId
    takes a few round trips."""
    producer.list_topics(topic, timeout=timeout)
    producer.init_transactions(timeout)


def new_producer(config: Mapping[str, str | int | bool]) -> tuple[Producer, Deliveries]:
    """A producer with the sink's defaults under `config`, and the callback that collects its failed deliveries."""
    deliveries = Deliveries()
    return Producer({**_PRODUCE_DEFAULTS, **config, "on_delivery": deliveries}), deliveries


class RowDigest:
    """An order-independent digest of the rows a task writes (count, and the sum of CRC-32s of key + value): the
    exactly-once sink keeps it in a task's marker so a replay of the task can be checked for the same rows."""

    def __init__(self) -> None:
        self.records = 0
        self.digest = 0

    def add(self, keys: Sequence[bytes | str | None], values: Sequence[bytes | str | None]) -> None:
        crc, total = zlib.crc32, self.digest
        for key, value in zip(keys, values, strict=True):
            k = key.encode() if isinstance(key, str) else (key or b"")
            v = value.encode() if isinstance(value, str) else (value or b"")
            total += crc(v, crc(k))
        self.digest = total & 0xFFFFFFFFFFFFFFFF
        self.records += len(values)

    def add_columns(self, keys: _Column, values: _Column) -> None:
        """The same digest from a batch's columns (`_column`): without nulls, one C-level pass per column."""
        if values.data is None:
            raise KbusOptionError("the data to write needs a 'value' column (string or binary)")
        if keys.nulls or values.nulls or keys.data is None:
            self.add(keys.data or [None] * len(values.data), values.data)
            return
        crc = zlib.crc32
        key_crcs: Iterator[int] = map(crc, keys.data)
        row_crcs: Iterator[int] = map(crc, values.data, key_crcs)
        self.digest = (self.digest + sum(row_crcs)) & 0xFFFFFFFFFFFFFFFF
        self.records += len(values.data)

    def add_batches(self, batches: Iterator[pa.RecordBatch]) -> None:
        for batch in batches:
            self.add_columns(_column(batch, "key", as_bytes=True), _column(batch, "value", as_bytes=True))


@dataclass
class _Column:
    data: list[Any] | None  # None: the batch has no such column
    nulls: int


def _column(batch: pa.RecordBatch, name: str, *, as_bytes: bool = False) -> _Column:
    """A column as a Python list. as_bytes (key, value): a string column as its UTF-8 bytes, what Spark's sink
    writes, through a cast to binary (the same buffers, no copy), so neither the digest nor the producer encodes
    each row again."""
    i = batch.schema.get_field_index(name)
    if i < 0:
        return _Column(None, 0)
    col = batch.column(i)
    if as_bytes and pa.types.is_string(col.type):
        col = col.cast(pa.binary())
    elif as_bytes and pa.types.is_large_string(col.type):
        col = col.cast(pa.large_binary())
    return _Column(col.to_pylist(), col.null_count)


def produce_batches(batches: Iterator[pa.RecordBatch], topic: str | None, producer: Producer, deliveries: Deliveries,
                    *, digest: RowDigest | None = None, flush: bool = True) -> int:
    """Produce every row; returns the count. With flush (at least once), once all are acknowledged, raising on any
    failed delivery; without it (a transaction: commit_transaction flushes, and fails if any delivery did) the
    caller checks `deliveries` after its commit."""
    count = 0
    for batch in batches:
        n = batch.num_rows
        value_col, key_col = _column(batch, "value", as_bytes=True), _column(batch, "key", as_bytes=True)
        values = value_col.data or []
        keys = key_col.data or [None] * n
        if digest is not None:
            digest.add_columns(key_col, value_col)
        partitions = _column(batch, "partition").data
        headers = _column(batch, "headers").data
        if topic is not None and partitions is None and headers is None:
            _produce_values(producer, topic, keys, values)  # the common case: one loop, no per-row checks
        else:
            topics = [topic] * n if topic is not None else _column(batch, "topic").data or [None] * n
            _produce_rows(producer, topics, keys, values, partitions or [None] * n, headers or [None] * n)
        count += n
        producer.poll(0)
        if deliveries.first_error is not None:
            break
    remaining = producer.flush() if flush else 0
    if deliveries.first_error is not None:
        raise KafkaException(deliveries.first_error)
    if remaining:
        raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"{remaining} records were not acknowledged"))
    return count


def _produce_values(producer: Producer, topic: str, keys: list[Any], values: list[Any]) -> None:
    produce = producer.produce
    for key, value in zip(keys, values, strict=True):
        try:
            produce(topic, value, key)
        except BufferError:
            _produce_when_room(producer, topic, value, key, -1, None)


def _produce_rows(producer: Producer, topics: list[Any], keys: list[Any], values: list[Any], partitions: list[Any],
                  headers: list[Any]) -> None:
    for topic, key, value, partition, row_headers in zip(topics, keys, values, partitions, headers, strict=True):
        if topic is None:
            raise KbusOptionError("a row has a null 'topic' and no 'topic' option is set")
        p = partition if partition is not None else -1  # -1: librdkafka's partitioner picks
        h = [(x["key"], x["value"]) for x in row_headers] if row_headers else None
        try:
            producer.produce(topic, value, key, partition=p, headers=h)
        except BufferError:
            _produce_when_room(producer, topic, value, key, p, h)


def _produce_when_room(producer: Producer, topic: str, value: Any, key: Any, partition: int,
                       headers: list[tuple[str, Any]] | None) -> None:
    while True:
        producer.poll(0.1)  # local queue full: let deliveries drain
        try:
            producer.produce(topic, value, key, partition=partition, headers=headers)
            return
        except BufferError:
            continue
