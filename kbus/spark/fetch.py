"""Executor side of a read: fetch one offset range of one partition as Arrow record batches.

The consumer is assign()ed straight to the start offset (no group, no commits), and messages are taken from
librdkafka in whole batches and turned into columns, so the only per-record work is Python pulling fields off the
message objects.

Consumers are cached in the Python worker process, one per client config (so one per query), as Spark's Kafka
connector caches its consumers per executor: a streaming query runs a task per partition in every micro-batch, and
a new consumer per task cost a connection, a Metadata request and two ListOffsets requests before its first record
(with 100 partitions the streaming read ran at 0.5-0.7x format("kafka"); bench/notes/spark_read.md). Spark reuses
its Python workers (spark.python.worker.reuse), which run one task at a time; a task checks its consumer out of the
cache and gives it back unassigned, so an idle consumer fetches nothing. The watermarks are asked only when the read
meets an out-of-range offset or the end of the partition before the end of its range (data loss checks).
"""

from __future__ import annotations

import contextlib
import os
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

# Consumer settings for range reads; anything the user passes as kafka.* wins.
_FETCH_DEFAULTS: dict[str, str | int | bool] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "isolation.level": "read_uncommitted",
    # librdkafka has one Fetch in flight per broker, so a cached consumer's next task waits for the last task's
    # prefetch; at the end of a partition the broker parks that Fetch this long.
    "fetch.wait.max.ms": 10,
    # What a task reads past the end of its range (librdkafka prefetches): about one Fetch of one partition. Java's
    # default, which Spark's connector reads with.
    "max.partition.fetch.bytes": 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    # Prefetch while fewer than one Arrow batch of records wait, and fetch again at once when the task has taken
    # them (librdkafka's default backoff is a second).
    "queued.min.messages": MAX_BATCH_ROWS,
    "queued.max.messages.kbytes": 64 * 1024,
    "fetch.queue.backoff.ms": 10,
}

# Idle consumers kept per worker process (one per query's client config), and how long (Spark's
# spark.kafka.consumer.cache.timeout is 5 minutes).
CACHE_CAPACITY = 4
CACHE_IDLE_S = 300.0

_TIMESTAMP_TYPES = {TIMESTAMP_CREATE_TIME: CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME: LOG_APPEND_TIME}

ConfigKey = tuple[tuple[str, str], ...]


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


@dataclass
class KafkaInputPartitions(InputPartition):
    """Several small ranges read by one task, one after another through the same consumer (minRecordsPerTask)."""

    parts: list[KafkaInputPartition]


@dataclass
class _Idle:
    consumer: Consumer
    since: float


class ConsumerCache:
    """Idle consumers of this process by client config. A consumer is out of the cache while a task reads with it,
    so two readers in one process (a driver-side test, an abandoned iterator not yet closed) never share one."""

    def __init__(self) -> None:
        self._idle: dict[ConfigKey, _Idle] = {}
        self._pid = os.getpid()
        self.created = 0  # consumers made, for tests and the benchmark

    @staticmethod
    def key(config: dict[str, str | int | bool]) -> ConfigKey:
        return tuple(sorted((k, str(v)) for k, v in config.items()))

    def checkout(self, config: dict[str, str | int | bool]) -> Consumer:
        if self._pid != os.getpid():  # a forked child: librdkafka's threads stayed in the parent
            self._idle, self._pid = {}, os.getpid()
        now = time.monotonic()
        for key in [k for k, idle in self._idle.items() if now - idle.since > CACHE_IDLE_S]:
            _close(self._idle.pop(key).consumer)
        idle = self._idle.pop(self.key(config), None)
        if idle is not None:
            return idle.consumer
        self.created += 1
        return Consumer(config)

    def checkin(self, config: dict[str, str | int | bool], consumer: Consumer) -> None:
        try:
            consumer.unassign()  # an idle consumer fetches nothing
        except (KafkaException, RuntimeError):
            _close(consumer)
            return
        key = self.key(config)
        old = self._idle.pop(key, None)
        if old is not None:
            _close(old.consumer)
        self._idle[key] = _Idle(consumer, time.monotonic())
        while len(self._idle) > CACHE_CAPACITY:
            _close(self._idle.pop(next(iter(self._idle))).consumer)  # the longest idle

    def clear(self) -> None:
        while self._idle:
            _close(self._idle.popitem()[1].consumer)


def _close(consumer: Consumer) -> None:
    with contextlib.suppress(KafkaException, RuntimeError):  # already closed: nothing left to release
        consumer.close()


consumers = ConsumerCache()


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
    if part.end <= part.start:
        return
    config: dict[str, str | int | bool] = {**_FETCH_DEFAULTS, **part.client_config}
    consumer = consumers.checkout(config)
    reusable = False
    try:
        yield from _consume(consumer, part)
        reusable = True
    except GeneratorExit:  # the task stopped reading early (a limit): the consumer itself is fine
        reusable = True
        raise
    finally:
        if reusable:
            consumers.checkin(config, consumer)
        else:
            _close(consumer)  # after an error nothing is known about its state


def read_ranges(parts: KafkaInputPartition | KafkaInputPartitions) -> Iterator[pa.RecordBatch]:
    """One task's input partition: a range, or a group of ranges."""
    if isinstance(parts, KafkaInputPartition):
        yield from read_range(parts)
        return
    for part in parts.parts:
        yield from read_range(part)


def _consume(consumer: Consumer, part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    tp = KafkaTopicPartition(part.topic, part.partition)
    schema = _arrow_schema(part.include_headers)
    next_offset, end = part.start, part.end
    consumer.assign([KafkaTopicPartition(part.topic, part.partition, next_offset)])
    deadline = time.monotonic() + part.poll_timeout_ms / 1000
    while next_offset < end:
        # consume() returns once it holds the requested count, so asking for exactly what is left means no
        # waiting on a gapless log; gaps (compaction, transaction markers) end with the partition-EOF event.
        wanted = min(MAX_BATCH_ROWS, end - next_offset)
        messages = consumer.consume(num_messages=wanted, timeout=_POLL_SLICE_S)
        rows = []
        reached_eof = False
        failure: KafkaError | None = None
        for m in messages:
            if m.partition() != part.partition or m.topic() != part.topic:
                continue  # cannot happen after assign(), which fences off the previous task's fetches; cheap
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    reached_eof = True
                    continue
                failure = err
                break
            offset = m.offset()
            assert offset is not None  # a message without an error has one
            if offset < next_offset:
                continue
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
        if failure is not None:
            # Out of range (auto.offset.reset=error): the range's start was deleted or its end truncated.
            position, new_end = _check_range(consumer, part, tp, next_offset, end)
            if (position, new_end) == (next_offset, end):
                raise KafkaException(failure)  # not a data loss: a real error
            end = new_end
            if position >= end:
                return
            next_offset = position
            consumer.assign([KafkaTopicPartition(part.topic, part.partition, next_offset)])
            continue
        if reached_eof:
            position = consumer.position([tp])[0].offset
            if position >= end:
                return  # the tail of the range was compacted away or held only control records
            _, end = _check_range(consumer, part, tp, next_offset, end)  # the partition ends before the range?
            if next_offset >= end:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{part.topic}-{part.partition}: no records for {part.poll_timeout_ms} ms while reading offsets "
                f"{next_offset}..{end - 1} (kafkaConsumer.pollTimeoutMs)"
            )


def _check_range(
    consumer: Consumer, part: KafkaInputPartition, tp: KafkaTopicPartition, position: int, end: int
) -> tuple[int, int]:
    """Where to go on from `position` and where to stop, given the partition's watermarks now: offsets below the
    log start offset were deleted, offsets at or above the high watermark were truncated (failOnDataLoss)."""
    name = f"{part.topic}-{part.partition}"
    low, high = consumer.get_watermark_offsets(tp, timeout=part.poll_timeout_ms / 1000, cached=False)
    if position < low:
        if part.fail_on_data_loss:
            raise KbusDataLossError(
                f"{name}: offsets {position}..{low - 1} are no longer on the broker (log start offset is {low}); "
                "set failOnDataLoss=false to skip them"
            )
        position = low
    if end > high:
        if part.fail_on_data_loss:
            raise KbusDataLossError(
                f"{name}: the partition ends at {high}, before the requested end offset {end} (truncated?); "
                "set failOnDataLoss=false to read what is left"
            )
        end = high
    return position, end
