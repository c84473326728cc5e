"""The `kbus` PySpark data source against a real kbus broker and a real local Spark (one shared session)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from tests.e2e.spark.helpers import (
    add_partitions,
    consume_all,
    create_topic,
    delete_records_before,
    produce,
    topic_exists,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _read(spark, bootstrap: str, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = spark.read.format("kbus").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    return reader.options(**options).load()


def test_batch_read_equals_what_confluent_kafka_produced(spark, broker) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-batch")
    create_topic(broker.bootstrap, topic, 3)
    produced = produce(broker.bootstrap, topic, [(f"trip-{i % 7}", f"value-{i}") for i in range(3000)])
    produced += produce(broker.bootstrap, topic, [(None, b"\x00\xffbinary")], partition=1, headers=[("h", b"v")])

    df = _read(spark, broker.bootstrap, topic, includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    assert df.rdd.getNumPartitions() == 3  # one Spark input partition per topic partition
    rows = df.collect()
    got = sorted((r.partition, r.offset, r.key, r.value) for r in rows)
    expected = sorted((p.partition, p.offset, p.key, p.value) for p in produced)
    assert got == expected
    assert {r.topic for r in rows} == {topic}
    assert {r.timestampType for r in rows} == {0}  # CreateTime
    headered = [r for r in rows if r.key is None]
    assert len(headered) == 1 and [(h.key, h.value) for h in headered[0].headers] == [("h", b"v")]
    assert all(r.headers == [] for r in rows if r.key is not None)

    # Per-partition JSON offsets, with -2 (earliest) and -1 (latest), as in Spark's Kafka source.
    ends = {p: max(x.offset for x in produced if x.partition == p) + 1 for p in range(3)}
    ranged = _read(
        spark,
        broker.bootstrap,
        topic,
        startingOffsets=json.dumps({topic: {"0": 10, "1": -2, "2": 5}}),
        endingOffsets=json.dumps({topic: {"0": 20, "1": 3, "2": -1}}),
    )
    got = sorted((r.partition, r.offset) for r in ranged.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(3)] + [(2, o) for o in range(5, ends[2])]

    # minPartitions splits big partitions into more Spark partitions without changing the rows.
    split = _read(spark, broker.bootstrap, topic, minPartitions="8")
    assert split.rdd.getNumPartitions() >= 8
    assert split.count() == len(produced)
    assert split.select("partition", "offset").distinct().count() == len(produced)


def test_streaming_available_now_resumes_exactly_from_checkpoint(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-stream")
    create_topic(broker.bootstrap, topic, 3)
    first = produce(broker.bootstrap, topic, [(f"k{i % 5}", f"a{i}") for i in range(600)])
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_once() -> list:
        query = (
            spark.readStream.format("kbus")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "250")
            .load()
            .selectExpr("partition", "offset", "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(180)
        assert query.exception() is None, query.exception()
        return [p for p in query.recentProgress if p.numInputRows > 0]

    batches = run_once()
    assert sum(p.numInputRows for p in batches) == 600
    assert len(batches) >= 3  # maxOffsetsPerTrigger=250 caps each micro-batch
    assert all(p.numInputRows <= 250 + 3 for p in batches)

    second = produce(broker.bootstrap, topic, [(f"k{i % 5}", f"b{i}") for i in range(400)])
    batches = run_once()
    assert sum(p.numInputRows for p in batches) == 400  # only the new records: resumed from the checkpoint
    start = json.loads(batches[0].sources[0].startOffset)
    assert start == {topic: {str(p): sum(1 for r in first if r.partition == p) for p in range(3)}}

    rows = spark.read.parquet(str(out)).collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    expected = sorted((r.partition, r.offset, r.value.decode()) for r in first + second)
    assert got == expected  # the union is the whole topic, nothing twice, nothing missed


def test_streaming_picks_up_new_partitions(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-grow")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, f"x{i}") for i in range(10)])
    sink = f"grow_{uuid.uuid4().hex[:6]}"

    def run_once() -> None:
        query = (
            spark.readStream.format("kbus")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
            .selectExpr("partition", "offset")
            .writeStream.format("parquet")
            .option("path", str(tmp_path / sink))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()

    run_once()
    add_partitions(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, [(None, f"y{i}") for i in range(5)], partition=1)
    run_once()
    got = sorted(tuple(r) for r in spark.read.parquet(str(tmp_path / sink)).collect())
    assert got == [(0, o) for o in range(10)] + [(1, o) for o in range(5)]  # new partition read from its start


def test_batch_write_then_read_back(spark, broker) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-write")
    create_topic(broker.bootstrap, topic, 3)
    data = [(f"trip-{i % 6}", f"{12.9 + i / 1000:.4f}, {77.5 + i / 1000:.4f}") for i in range(1000)]
    df = spark.createDataFrame(data, "key string, value string").repartition(2)
    df.write.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).mode(
        "append"
    ).save()

    # Read back independently of Spark: every row arrived once, keyed records grouped by partition.
    records = consume_all(broker.bootstrap, topic)
    assert sorted((m.key().decode(), m.value().decode()) for m in records) == sorted(data)
    partitions_per_key: dict[str, set[int]] = {}
    for m in records:
        partitions_per_key.setdefault(m.key().decode(), set()).add(m.partition())
    assert all(len(ps) == 1 for ps in partitions_per_key.values())
    back = _read(spark, broker.bootstrap, topic).selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v")
    assert sorted(tuple(r) for r in back.collect()) == sorted(data)

    # topic and partition and headers columns, binary values.
    other = _topic("spark-write-cols")
    create_topic(broker.bootstrap, other, 2)
    rows = [(other, 1, b"\x01\x02", [("source", b"spark")]), (other, 0, b"\x03", [])]
    cols = spark.createDataFrame(
        rows, "topic string, partition int, value binary, headers array<struct<key:string,value:binary>>"
    )
    cols.write.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap).mode("append").save()
    got = sorted((m.partition(), m.value(), m.headers() or []) for m in consume_all(broker.bootstrap, other))
    assert got == [(0, b"\x03", []), (1, b"\x01\x02", [("source", b"spark")])]


def test_write_errors_fail_the_job(spark, broker) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-write-err")
    create_topic(broker.bootstrap, topic, 1, config={"max.message.bytes": "1000"})

    def write(df, **options: str) -> None:  # type: ignore[no-untyped-def]
        writer = df.write.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic)
        writer.options(**options).mode("append").save()

    # The broker refuses the record (MESSAGE_TOO_LARGE): the task, and so the job, fails.
    with pytest.raises(Exception, match=r"(?i)message size too large"):
        write(spark.createDataFrame([("x" * 5000,)], "value string"))
    # A local librdkafka error (no such partition) fails it too.
    with pytest.raises(Exception, match=r"(?i)unknown.partition"):
        write(spark.createDataFrame([("v", 7)], "value string, partition int"))
    with pytest.raises(Exception, match="'value' column"):
        write(spark.createDataFrame([("k",)], "key string"))
    assert consume_all(broker.bootstrap, topic) == []


def test_streaming_topic_to_topic(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, target = _topic("spark-src"), _topic("spark-dst")
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, target, 2)
    produced = produce(broker.bootstrap, source, [(f"k{i % 4}", f"m{i}") for i in range(500)])
    query = (
        spark.readStream.format("kbus")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kbus")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    got = sorted((m.key(), m.value()) for m in consume_all(broker.bootstrap, target))
    assert got == sorted((p.key, p.value.upper()) for p in produced)


def test_deleted_data_follows_fail_on_data_loss(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-loss")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, [(None, f"a{i}") for i in range(100)])
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def start(fail_on_data_loss: str):  # type: ignore[no-untyped-def]
        query = (
            spark.readStream.format("kbus")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
            .selectExpr("offset", "CAST(value AS STRING) AS value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        with contextlib.suppress(StreamingQueryException):  # the failure is checked through query.exception()
            query.awaitTermination(120)
        return query

    assert start("true").exception() is None
    produce(broker.bootstrap, topic, [(None, f"b{i}") for i in range(100)])
    delete_records_before(broker.bootstrap, topic, 0, 150)  # offsets 100..149 go before the query saw them

    failed = start("true")
    assert failed.exception() is not None
    assert "failOnDataLoss" in str(failed.exception())

    assert start("false").exception() is None  # same checkpoint: skips what is gone, reads the rest
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(100)) + list(range(150, 200))

    # Batch: explicit offsets below the log start offset.
    explicit = {"startingOffsets": json.dumps({topic: {"0": 120}})}
    with pytest.raises(Exception, match="no longer on the broker"):
        _read(spark, broker.bootstrap, topic, **explicit).collect()
    assert _read(spark, broker.bootstrap, topic, failOnDataLoss="false", **explicit).count() == 50


def test_missing_topic_reads_empty_and_is_not_created(spark, broker) -> None:  # type: ignore[no-untyped-def]
    topic = _topic("spark-missing")
    assert _read(spark, broker.bootstrap, topic).count() == 0
    assert not topic_exists(broker.bootstrap, topic)


def test_pattern_assign_and_timestamp_positions(spark, broker) -> None:  # type: ignore[no-untyped-def]
    prefix = _topic("spark-pat")
    a, b = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap, a, 2)
    create_topic(broker.bootstrap, b, 1)
    base = 1_700_000_000_000
    for i in range(20):  # one record per second of (fake) event time in each partition
        produce(broker.bootstrap, a, [(None, f"a{i}")], partition=i % 2, timestamp_ms=base + 1000 * i)
    produce(broker.bootstrap, b, [(None, f"b{i}") for i in range(5)])

    def load(**options: str):  # type: ignore[no-untyped-def]
        return spark.read.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap).options(**options).load()

    by_pattern = load(subscribePattern=f"{prefix}-.*")
    assert sorted(tuple(r) for r in by_pattern.groupBy("topic").count().collect()) == [(a, 20), (b, 5)]
    assigned = load(assign=json.dumps({a: [1]}))
    assert {(r.topic, r.partition) for r in assigned.collect()} == {(a, 1)}
    assert assigned.count() == 10

    # startingTimestamp / endingTimestamp go through ListOffsets by timestamp (first offset at or after it).
    window = load(subscribe=a, startingTimestamp=str(base + 10_000), endingTimestamp=str(base + 16_000))
    got = sorted(r.value.decode() for r in window.collect())
    assert got == [f"a{i}" for i in range(10, 16)]
    timestamps = sorted(r.timestamp for r in window.select("timestamp").collect())
    assert int(timestamps[0].replace(tzinfo=dt.UTC).timestamp() * 1000) == base + 10_000
