"""Executor side of a read: fetch one offset range of one partition as Arrow record batches.

The consumer is assign()ed straight to the start offset (no group, no commits) with large fetch sizes, and messages
are taken from librdkafka in whole batches and turned into columns, so the only per-record work is Python pulling
fields off the message objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import InputPartition
from pyspark.sql.pandas.types import to_arrow_schema

from kbus.spark.metadata import KbusDataLossError
from kbus.spark.schema import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, source_schema

# Rows per Arrow batch handed to Spark: big enough to amortise per-batch costs, small enough to bound memory.
MAX_BATCH_ROWS = 20_000
_POLL_SLICE_S = 1.0

# Consumer settings for bulk range reads; anything the user passes as kafka.* wins.
_FETCH_DEFAULTS = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "isolation.level": "read_uncommitted",
    "fetch.wait.max.ms": 100,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.min.messages": 200_000,
    "queued.max.messages.kbytes": 256 * 1024,
}

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}


@dataclass
class KafkaInputPartition(InputPartition):
    """Everything read() needs travels here: the reader object on executors is a fresh copy (see spark notes)."""

    topic: str
    partition: int
    start: int
    end: int
    client_config: dict[str, str] = field(default_factory=dict)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    poll_timeout_ms: int = 120_000


def _arrow_schema(include_headers: bool) -> pa.Schema:
    # Spark checks batches against exactly this schema (to_arrow_schema with UTC) before accepting them.
    return to_arrow_schema(source_schema(include_headers), timezone="UTC")


def messages_to_batch(
    messages: list[Message], topic: str, partition: int, include_headers: bool, schema: pa.Schema | None = None
) -> pa.RecordBatch:
    """confluent-kafka Message objects (no errors among them) -> one RecordBatch in the source schema."""
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([s[1] * 1000 if s[0] else None for s in stamps], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([_TIMESTAMP_TYPES.get(s[0], NO_TIMESTAMP_TYPE) for s in stamps], pa.int32()),
    ]
    if include_headers:
        headers = [[{"key": k, "value": v} for k, v in _header_pairs(m)] for m in messages]
        columns.append(pa.array(headers, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))))
    return pa.RecordBatch.from_arrays(columns, schema=schema or _arrow_schema(include_headers))


def _header_pairs(m: Message) -> list[tuple[str, str | bytes | None]]:
    raw = m.headers()  # librdkafka gives a list of pairs (its type admits a dict too)
    if not raw:
        return []
    return list(raw.items()) if isinstance(raw, dict) else raw


def read_range(part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Yield offsets [start, end) of one partition. Deterministic for a given range: Spark replays it on retry."""
    config = {**_FETCH_DEFAULTS, **part.client_config}
    consumer = Consumer(config)
    try:
        yield from _consume(consumer, part)
    finally:
        consumer.close()


def _consume(consumer: Consumer, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    name = f"{part.topic}-{part.partition}"
    tp = KafkaTopicPartition(part.topic, part.partition)
    low, high = consumer.get_watermark_offsets(tp, timeout=part.poll_timeout_ms / 1000, cached=False)
    start, end = part.start, part.end
    if start < low:
        if part.fail_on_data_loss:
            raise KbusDataLossError(
                f"{name}: offsets {start}..{low - 1} are no longer on the broker (log start offset is {low}); "
                "set failOnDataLoss=false to skip them"
            )
        start = low
    if end > high:
        if part.fail_on_data_loss:
            raise KbusDataLossError(
                f"{name}: the partition ends at {high}, before the requested end offset {end} (truncated?); "
                "set failOnDataLoss=false to read what is left"
            )
        end = high
    if start >= end:
        return
    schema = _arrow_schema(part.include_headers)
    consumer.assign([KafkaTopicPartition(part.topic, part.partition, start)])
    next_offset = start
    deadline = time.monotonic() + part.poll_timeout_ms / 1000
    while next_offset < end:
        # consume() returns once it holds the requested count, so asking for exactly what is left means no
        # waiting on a gapless log; gaps (compaction, transaction markers) end with the partition-EOF event.
        wanted = min(MAX_BATCH_ROWS, end - next_offset)
        messages = consumer.consume(num_messages=wanted, timeout=_POLL_SLICE_S)
        rows = []
        reached_eof = False
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    reached_eof = True
                    continue
                raise KafkaException(err)
            offset = m.offset()
            assert offset is not None  # a message without an error has one
            if offset >= end:
                next_offset = end  # a gap ran past the end of the range: the range is complete
                break
            rows.append(m)
            next_offset = offset + 1
        if rows:
            deadline = time.monotonic() + part.poll_timeout_ms / 1000
            yield messages_to_batch(rows, part.topic, part.partition, part.include_headers, schema)
        if next_offset >= end:
            return
        if reached_eof:
            position = consumer.position([tp])[0].offset
            if position >= end:
                return  # the tail of the range was compacted away or held only control records
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{name}: no records for {part.poll_timeout_ms} ms while reading offsets {next_offset}..{end - 1} "
                "(kafkaConsumer.pollTimeoutMs)"
            )
