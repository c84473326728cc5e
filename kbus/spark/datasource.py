"""The `kbus` PySpark data source: batch and streaming reads and writes over the Kafka protocol.

Where each piece runs matters (pyspark 4.x): DataSource methods and stream-reader offset calls run in Python
processes on the driver; read() and write() run in executor workers on a pickled copy of a fresh reader/writer.
So readers keep clients out of their pickled state and pass everything read() needs inside the input partition.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kbus.spark.fetch import KafkaInputPartition, KafkaInputPartitions, read_ranges
from kbus.spark.metadata import KbusDataLossError, OffsetReader, check_brokers
from kbus.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    SparkOffset,
    TopicPartition,
    from_spark_offset,
    pack_ranges,
    rate_limit,
    split_ranges,
    to_spark_offset,
)
from kbus.spark.options import (
    EARLIEST,
    LATEST,
    KbusOptionError,
    SinkOptions,
    SourceOptions,
    client_config,
    parse_sink_options,
    parse_source_options,
)
from kbus.spark.produce import (
    ProduceSummary,
    check_sink_schema,
    new_producer,
    produce_batches,
    produce_transaction,
    stage_batches,
)
from kbus.spark.schema import source_schema
from kbus.spark.task_txn import TaskWrite, write_partition

log = logging.getLogger(__name__)


def _input_partition(options: SourceOptions, r: OffsetRange) -> KafkaInputPartition:
    return KafkaInputPartition(
        topic=r.topic,
        partition=r.partition,
        start=r.start,
        end=r.end,
        client_config=options.client_config,
        fail_on_data_loss=options.fail_on_data_loss,
        include_headers=options.include_headers,
        poll_timeout_ms=options.poll_timeout_ms,
    )


def _input_partitions(
    options: SourceOptions, ranges: list[OffsetRange]
) -> list[KafkaInputPartition | KafkaInputPartitions]:
    """One task per range (Spark's rule), more with minPartitions; with minRecordsPerTask (and no minPartitions)
    small ranges share a task."""
    split = split_ranges(ranges, options.min_partitions)
    if options.min_partitions or options.min_records_per_task <= 1:
        return [_input_partition(options, r) for r in split]
    out: list[KafkaInputPartition | KafkaInputPartitions] = []
    for group in pack_ranges(split, options.min_records_per_task):
        parts = [_input_partition(options, r) for r in group]
        out.append(parts[0] if len(parts) == 1 else KafkaInputPartitions(parts))
    return out


class KbusBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        assert o.ending is not None
        with OffsetReader(o.client_config) as reader:
            tps = reader.topic_partitions(o.subscription)
            start = reader.resolve(o.starting, tps, default=EARLIEST, timestamp_strategy=o.timestamp_strategy)
            end = reader.resolve(o.ending, tps, default=LATEST, timestamp_strategy="latest")
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise KbusOptionError(
                    f"{tp[0]}-{tp[1]}: the ending offset {end[tp]} is before the starting offset {start[tp]}"
                )
            ranges.append(OffsetRange(tp[0], tp[1], start[tp], end[tp]))
        parts = _input_partitions(o, ranges)
        # Spark needs at least one input partition; an empty range reads nothing.
        return parts or [KafkaInputPartition(topic="", partition=0, start=0, end=0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition | KafkaInputPartitions)
        return read_ranges(partition)


class KbusStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {"topic": {"partition": next_offset}}; Spark checkpoints them, so a restart resumes exactly."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._client: OffsetReader | None = None
        self._target: PartitionOffsets | None = None  # frozen end for trigger=availableNow
        self._latest_seen: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, object]:
        # The copy shipped to executors must not carry a live client.
        return {**self.__dict__, "_client": None}

    def _offsets(self) -> OffsetReader:
        if self._client is None:
            self._client = OffsetReader(self.options.client_config)
        return self._client

    def _latest(self) -> PartitionOffsets:
        reader = self._offsets()
        tps = reader.topic_partitions(self.options.subscription)
        return {tp: high for tp, (_low, high) in reader.watermarks(tps).items()}

    def initialOffset(self) -> SparkOffset:
        o = self.options
        reader = self._offsets()
        tps = reader.topic_partitions(o.subscription)
        start = reader.resolve(o.starting, tps, default=EARLIEST, timestamp_strategy=o.timestamp_strategy)
        return to_spark_offset(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def latestOffset(self, start: SparkOffset, limit: ReadLimit) -> SparkOffset:
        begin = from_spark_offset(start)
        latest = dict(self._target) if self._target is not None else self._latest()
        self._latest_seen = latest
        fail = self.options.fail_on_data_loss
        gone = sorted(tp for tp in begin if tp not in latest and self._target is None)
        if gone and fail:
            names = ", ".join(f"{t}-{p}" for t, p in gone)
            raise KbusDataLossError(f"partitions {names} no longer exist; set failOnDataLoss=false to go on without")
        end: PartitionOffsets = {}
        for tp, high in latest.items():
            if tp in begin and high < begin[tp]:
                if fail:
                    raise KbusDataLossError(
                        f"{tp[0]}-{tp[1]}: the partition now ends at {high}, before offset {begin[tp]} already "
                        "read (truncated or recreated?); set failOnDataLoss=false to go on"
                    )
                log.warning("%s-%s went back from %s to %s; some data may be missed", *tp, begin[tp], high)
                high = begin[tp]
            end[tp] = high
        for tp in begin:
            end.setdefault(tp, begin[tp])  # availableNow: keep partitions the frozen target did not list
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(self._starts(begin, end), end, limit.max_rows)
        return to_spark_offset(end)

    def _starts(self, begin: PartitionOffsets, end: PartitionOffsets) -> PartitionOffsets:
        """Start offsets for every partition of `end`; partitions new since `begin` start at their earliest."""
        new = [tp for tp in end if tp not in begin]
        marks = self._offsets().watermarks(new) if new else {}
        return {tp: begin[tp] if tp in begin else marks[tp][0] for tp in end}

    def reportLatestOffset(self) -> SparkOffset | None:
        return to_spark_offset(self._latest_seen) if self._latest_seen is not None else None

    def partitions(self, start: SparkOffset, end: SparkOffset) -> Sequence[InputPartition]:
        begin, stop = from_spark_offset(start), from_spark_offset(end)
        starts = self._starts(begin, stop)
        ranges = [OffsetRange(t, p, starts[(t, p)], stop[(t, p)]) for (t, p) in sorted(stop)]
        return _input_partitions(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaInputPartition | KafkaInputPartitions)
        return read_ranges(partition)

    def commit(self, end: SparkOffset) -> None:
        # Nothing to do: like Spark's Kafka source, the checkpoint (not a consumer group) owns the offsets.
        pass

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _write(options: SinkOptions, iterator: Iterator[pa.RecordBatch], save_id: str | None) -> WriterCommitMessage:
    if options.transaction_scope == "task":
        return write_partition(iterator, options, save_id)  # exactly once, in the task's own transaction
    if options.transaction_scope == "batch":
        return stage_batches(iterator)  # produced by the driver's commit, in one transaction
    producer, deliveries = new_producer(options.client_config)
    return ProduceSummary(produce_batches(iterator, options.topic, producer, deliveries))


def _log_tasks(messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    done = [m for m in messages if isinstance(m, TaskWrite)]
    skipped = [m.partition for m in done if not m.written and m.records]
    if skipped:  # a replayed micro-batch, or a task whose earlier attempt had committed
        log.info("batch %s: partitions %s were already written (markers found); not written again", batch_id, skipped)


class KbusWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        # Made on the driver, so every task attempt of this save() carries the same id (its markers' owner).
        self.save_id = uuid.uuid4().hex

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.options, iterator, self.save_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        # at least once: every record was acknowledged before its task finished; transactionScope=batch writes
        # the whole job's rows here, all or nothing; transactionScope=task: each task committed its own
        if self.options.transaction_scope == "batch":
            produce_transaction(messages, self.options.client_config, self.options.topic, None)
        _log_tasks(messages, None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        pass  # a Kafka log cannot take records back: the sink is at least once, as Spark's is


class KbusStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return _write(self.options, iterator, None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.transaction_scope == "batch":  # the micro-batch in one transaction, at most once per id
            produce_transaction(messages, self.options.client_config, self.options.topic, batchId)
        _log_tasks(messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # committed tasks stay written; their markers keep Spark's retry of the batch from writing them again


def _sink_options(options: Mapping[str, str], schema: StructType) -> SinkOptions:
    sink = parse_sink_options(options)
    check_sink_schema(schema, sink.topic)
    return sink


class KbusDataSource(DataSource):
    """spark.read/readStream/write/writeStream .format("kbus"), with the options of Spark's Kafka source."""

    @classmethod
    def name(cls) -> str:
        return "kbus"

    def schema(self) -> StructType:
        # Spark asks for the schema when the job calls load(): checking the brokers here makes an unreachable
        # broker fail that call, in the driver, before any query thread or task starts retrying.
        check_brokers(client_config(self.options)["bootstrap.servers"])
        headers = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return source_schema(headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KbusBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KbusStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise KbusOptionError("save mode overwrite is not supported for kbus topics; use append")
        return KbusWriter(_sink_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # Every output mode (append, update, complete) just appends its rows to the topic, as Spark's sink does.
        return KbusStreamWriter(_sink_options(self.options, schema))


__all__ = ["KbusDataSource", "TopicPartition"]
