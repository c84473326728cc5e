"""The kbus data source's option parsing and offset arithmetic (Spark Kafka source semantics); no Spark started."""

from __future__ import annotations

import itertools
import json

import pyarrow as pa
import pytest

from kbus.spark.offsets import (
    OffsetRange,
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
    parse_sink_options,
    parse_source_options,
    parse_subscription,
)
from kbus.spark.produce import RowDigest
from kbus.spark.task_txn import KbusSinkError, Marker

pytestmark = pytest.mark.spark  # imports pyspark (the spark extra); starts nothing

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark_batch_and_streaming() -> None:
    batch = parse_source_options({**BS, "subscribe": "a,b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert batch.starting.kind == "earliest" and batch.ending is not None and batch.ending.kind == "latest"
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source_options({**BS, "subscribe": "a"}, streaming=True)
    assert stream.starting.kind == "latest" and stream.ending is None


def test_kafka_prefixed_options_become_client_config_and_group_is_private() -> None:
    o = parse_source_options({**BS, "subscribe": "t", "kafka.fetch.wait.max.ms": "10"}, streaming=False)
    assert o.client_config["bootstrap.servers"] == "127.0.0.1:9092"
    assert o.client_config["fetch.wait.max.ms"] == "10"
    assert o.client_config["group.id"].startswith("spark-kafka-source-")
    plain = parse_source_options({"bootstrap.servers": "h:1", "subscribe": "t"}, streaming=False)
    assert plain.client_config["bootstrap.servers"] == "h:1"


@pytest.mark.parametrize(
    "options, message",
    [
        ({"subscribe": "t"}, "kafka.bootstrap.servers"),
        ({**BS}, "exactly one of"),
        ({**BS, "subscribe": "t", "assign": '{"t":[0]}'}, "exactly one of"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, "streaming queries only"),
        ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, "not allowed"),
        ({**BS, "subscribe": "t", "startingOffsets": "{bad"}, "not valid JSON"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "maybe"}, "true or false"),
        ({**BS, "subscribePattern": "(", "minPartitions": "2"}, "regex"),
        ({**BS, "assign": '{"t": "0"}'}, "assign"),
        ({**BS, "subscribe": "t", "minPartitions": "0"}, "positive integer"),
    ],
)
def test_bad_options_fail_with_a_clear_message(options: dict, message: str) -> None:
    with pytest.raises(KbusOptionError, match=message):
        parse_source_options(options, streaming=False)


def test_streaming_rejects_ending_offsets() -> None:
    with pytest.raises(KbusOptionError, match="batch queries only"):
        parse_source_options({**BS, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_offset_json_and_timestamp_precedence() -> None:
    spec = {"t": {"0": 5, "1": -2}, "u": {"0": -1}}
    o = parse_source_options({**BS, "subscribe": "t,u", "startingOffsets": json.dumps(spec)}, streaming=True)
    assert o.starting.kind == "specific"
    assert o.starting.offsets == {"t": {0: 5, 1: EARLIEST}, "u": {0: LATEST}}
    o = parse_source_options(
        {**BS, "subscribe": "t", "startingOffsets": "earliest", "startingTimestamp": "1700000000000"},
        streaming=False,
    )
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 1_700_000_000_000


def test_subscription_matching() -> None:
    pattern = parse_subscription({"subscribePattern": "abc-.*"})
    assert pattern.matches("abc-bus-location") and not pattern.matches("xabc-1") and not pattern.matches("__abc-")
    assign = parse_subscription({"assign": '{"t": [2, 0, 2]}'})
    assert assign.assignment == {"t": (0, 2)}


def test_sink_options() -> None:
    assert parse_sink_options({**BS, "topic": "out"}).topic == "out"
    assert parse_sink_options({**BS}).topic is None
    with pytest.raises(KbusOptionError, match=r"value\.serializer"):
        parse_sink_options({**BS, "kafka.value.serializer": "x"})
    assert parse_sink_options({**BS}).transaction_scope is None  # at least once
    eos = parse_sink_options({**BS, "kafka.transactional.id": "s1"})
    assert (eos.transaction_scope, eos.sink_id) == ("task", "s1")
    assert parse_sink_options({**BS, "kafka.transactional.id": "s1", "transactionScope": "Batch"}).transaction_scope \
        == "batch"
    with pytest.raises(KbusOptionError, match="task or batch"):
        parse_sink_options({**BS, "kafka.transactional.id": "s1", "transactionScope": "row"})
    with pytest.raises(KbusOptionError, match=r"needs 'kafka\.transactional\.id'"):
        parse_sink_options({**BS, "transactionScope": "task"})


def test_task_marker_and_row_digest() -> None:
    marker = Marker("query:q1", 7, 3, 12345)
    assert Marker.parse(8, marker.metadata()) == marker
    assert Marker.parse(-1001, "") is None  # nothing committed yet
    with pytest.raises(KbusSinkError, match="not a kbus task marker"):
        Marker.parse(8, "kbus spark sink batch 7")  # transactionScope=batch's marker, or a stranger's
    a, b = RowDigest(), RowDigest()
    a.add([b"k1", None, "k3"], [b"v1", b"v2", "v3"])
    b.add(["k3"], ["v3"])
    b.add([None, b"k1"], [b"v2", b"v1"])
    assert (a.records, a.digest) == (b.records, b.digest)  # the same rows in another order
    c = RowDigest()
    c.add([b"k1", None, "k3"], [b"v1", b"v2", "v4"])
    assert c.digest != a.digest
    # from Arrow batches (the sink's path: string columns as their UTF-8 bytes, one pass without nulls), the same
    # digest as row by row, so a marker written before still matches its replay
    for keys in (["k1", "k2", "k3"], ["k1", None, "k3"]):
        values = ["v1", "v2", "v3é"]
        rows, arrow, binary = RowDigest(), RowDigest(), RowDigest()
        rows.add(keys, values)
        arrow.add_batches(iter([pa.RecordBatch.from_pydict({"key": keys, "value": values})]))
        binary.add_batches(iter([pa.RecordBatch.from_pydict(
            {"key": [k.encode() if k else None for k in keys], "value": [v.encode() for v in values]})]))
        assert (rows.records, rows.digest) == (arrow.records, arrow.digest) == (binary.records, binary.digest)


def test_spark_offset_json_round_trip_uses_string_partitions() -> None:
    offsets = {("t", 0): 10, ("t", 1): 20, ("u", 0): 0}
    doc = to_spark_offset(offsets)
    assert doc == {"t": {"0": 10, "1": 20}, "u": {"0": 0}}
    assert from_spark_offset(json.loads(json.dumps(doc))) == offsets


def test_rate_limit_is_proportional_and_never_starves() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 7}
    end = {("t", 0): 900, ("t", 1): 200, ("t", 2): 8}
    capped = rate_limit(start, end, 100)
    assert capped[("t", 0)] == 89  # 100 * 900/1001, floored
    assert capped[("t", 1)] == 109
    assert capped[("t", 2)] == 8  # a 1-record backlog still advances
    assert rate_limit(start, end, 10_000) == end


def test_split_ranges_for_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    pieces = split_ranges(ranges, 10)
    assert sum(r.size for r in pieces) == 1000
    assert len([r for r in pieces if r.partition == 0]) == 9
    assert len([r for r in pieces if r.partition == 1]) == 1
    p0 = sorted((r.start, r.end) for r in pieces if r.partition == 0)
    assert p0[0][0] == 0 and p0[-1][1] == 900
    assert all(a[1] == b[0] for a, b in itertools.pairwise(p0))


def test_register_warns_when_workers_run_another_python() -> None:
    import sys
    import warnings
    from types import SimpleNamespace

    import kbus.spark
    from kbus.spark.datasource import KbusDataSource

    registered: list[type] = []

    def fake(python: str, master: str = "local[*]") -> SimpleNamespace:
        return SimpleNamespace(
            sparkContext=SimpleNamespace(pythonExec=python, master=master),
            dataSource=SimpleNamespace(register=registered.append),
        )

    with pytest.warns(UserWarning, match="PYSPARK_PYTHON"):
        kbus.spark.register(fake("/usr/bin/python3-elsewhere"))
    kbus.spark.register(fake(sys.executable))
    # on a cluster the executors' Python is another machine's: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kbus.spark.register(fake("/usr/bin/python3-elsewhere", master="spark://127.0.0.1:7077"))
    assert registered == [KbusDataSource, KbusDataSource, KbusDataSource]


def test_min_records_per_task_packs_small_ranges_of_a_micro_batch() -> None:
    from kbus.spark.datasource import _input_partitions
    from kbus.spark.fetch import KafkaInputPartition, KafkaInputPartitions

    ranges = [OffsetRange("t", p, 0, 2000) for p in range(10)] + [OffsetRange("t", 10, 0, 50_000)]
    groups = pack_ranges([*ranges, OffsetRange("t", 11, 7, 7)], 5000)
    assert [[r.partition for r in g] for g in groups] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [10], [9]]
    # a micro-batch of 8 ranges or fewer keeps a task per range (Spark's rule), and a small one keeps ~8 tasks
    assert pack_ranges(ranges[:8], 5000) == [[r] for r in ranges[:8]]
    assert len(pack_ranges([OffsetRange("t", p, 0, 100) for p in range(40)], 20_000)) == 8

    stream = parse_source_options({**BS, "subscribe": "t"}, streaming=True)
    assert stream.min_records_per_task == 20_000  # streaming's default; batch reads keep one task per range
    assert parse_source_options({**BS, "subscribe": "t"}, streaming=False).min_records_per_task == 0
    tasks = _input_partitions(stream, ranges)  # 70,000 records: groups of 70,000 / 8 at most
    assert len(tasks) == 3
    assert isinstance(tasks[0], KafkaInputPartitions) and [p.partition for p in tasks[0].parts] == list(range(5))
    assert isinstance(tasks[1], KafkaInputPartitions) and [p.partition for p in tasks[1].parts] == list(range(5, 10))
    assert isinstance(tasks[2], KafkaInputPartition) and (tasks[2].start, tasks[2].end) == (0, 50_000)
    # 0 turns it off, and minPartitions (parallelism asked for) wins over it
    for extra in ({"minRecordsPerTask": "0"}, {"minPartitions": "11"}):
        options = parse_source_options({**BS, "subscribe": "t", **extra}, streaming=True)
        assert [type(t) for t in _input_partitions(options, ranges)] == [KafkaInputPartition] * 11
    with pytest.raises(KbusOptionError, match="minRecordsPerTask"):
        parse_source_options({**BS, "subscribe": "t", "minRecordsPerTask": "-1"}, streaming=True)
