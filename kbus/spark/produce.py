"""Executor side of a write: Arrow record batches -> produce requests through confluent-kafka.

Columns, as in Spark's Kafka sink: value (required), key, topic (the `topic` option overrides it), partition,
headers. Delivery is at least once, like Spark's sink; any delivery error fails the task.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructType

from kbus.spark.options import KbusOptionError

# The Java producer's partitioner, so a key lands in the same partition whether Spark or a Java client wrote it.
_PRODUCE_DEFAULTS = {"partitioner": "murmur2_random", "linger.ms": 5}

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


class _Deliveries:
    def __init__(self) -> None:
        self.first_error: KafkaError | None = None
        self.failed = 0

    def __call__(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failed += 1
            self.first_error = self.first_error or err


def produce_batches(batches: Iterator[pa.RecordBatch], client_config: dict[str, str], topic: str | None) -> int:
    """Produce every row; returns the count once all are acknowledged, raises on any failed delivery."""
    producer = Producer({**_PRODUCE_DEFAULTS, **client_config})
    deliveries = _Deliveries()
    count = 0
    for batch in batches:
        columns = batch.to_pydict()
        n = batch.num_rows
        values = columns["value"]
        keys = columns.get("key") or [None] * n
        topics = [topic] * n if topic is not None else columns["topic"]
        partitions = columns.get("partition") or [None] * n
        headers = columns.get("headers") or [None] * n
        for i in range(n):
            if topics[i] is None:
                raise KbusOptionError("a row has a null 'topic' and no 'topic' option is set")
            kwargs: dict = {"on_delivery": deliveries}
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    producer.produce(topics[i], values[i], keys[i], **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)  # local queue full: let deliveries drain
        count += n
        producer.poll(0)
        if deliveries.first_error is not None:
            break
    remaining = producer.flush()
    if deliveries.first_error is not None:
        raise KafkaException(deliveries.first_error)
    if remaining:
        raise KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, f"{remaining} records were not acknowledged"))
    return count
