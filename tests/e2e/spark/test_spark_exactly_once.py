"""Exactly-once Spark writes (kafka.transactional.id) and read_committed reads, with real Spark and a real broker.

The streaming job is killed -9 mid-stream and its last committed micro-batch is made to look uncommitted, so the
restarted query replays a batch whose output already reached Kafka: the sink's transaction marker must keep it
from being written twice. A plain at-least-once sink would duplicate it (Spark's own Kafka sink does)."""

from __future__ import annotations

import ast
import collections
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.e2e.spark.helpers import create_topic, produce, submit_env
from tests.e2e.spark.jobs import stream_exactly_once
from tests.e2e.spark.test_spark_crash_resume import KBUS, _batches, _kill_group, assert_killed_driver_kept_to_its_tmp

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

JOBS = Path(__file__).resolve().parent / "jobs"
JOB = JOBS / "stream_exactly_once.py"


def _submit(bootstrap: str, source: str, sink: str, work: Path, mode: str, log: Path, *, job: Path = JOB,
            master: str = "local[2]") -> subprocess.Popen:
    cmd = [str(KBUS), "spark-submit", "--master", master, str(job), bootstrap, source, sink, str(work), mode]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=submit_env(work / "jvm-tmp"),
                                start_new_session=True)


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + timeout
    while len(eof) < partitions and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            out.append(m.value())
    c.close()
    return out


def test_kill_9_mid_stream_then_restart_writes_everything_once(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source, sink = f"eos-in-{uuid.uuid4().hex[:8]}", f"eos-out-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, sink, 2)
    # maxOffsetsPerTrigger=500: 3 micro-batches, 2 committed before the kill and the last one replayed after it
    produced = produce(broker.bootstrap, source, [(f"k{i % 7}", f"a{i}") for i in range(1500)])
    checkpoint = tmp_path / "checkpoint"
    running = _submit(broker.bootstrap, source, sink, tmp_path, "run", tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 420  # a bound on a hang: a loaded CI box takes minutes
        while len(_batches(checkpoint / "commits")) < 2:
            assert running.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no two committed micro-batches within 420 s"
            time.sleep(0.2)
    finally:
        _kill_group(running)
    assert_killed_driver_kept_to_its_tmp(tmp_path)
    commits = _batches(checkpoint / "commits")
    # the worst moment: the last batch's output is committed in Kafka but not in Spark's checkpoint
    (checkpoint / "commits" / str(commits[-1])).unlink()
    (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    # the restart: the same query from the same checkpoint, in another JVM (this session's, already running)
    resumed = stream_exactly_once.start(spark, broker.bootstrap, source, sink, str(tmp_path), "now")
    try:
        assert resumed.awaitTermination(420), "the resumed query did not finish within 420 s"
    finally:
        resumed.stop()
    assert resumed.exception() is None, resumed.exception()
    got = collections.Counter(read_committed(broker.bootstrap, sink, 2))
    expected = collections.Counter(f"{p.value.decode()}@{p.partition}/{p.offset}".encode() for p in produced)
    assert got == expected  # every record once: none twice, none missed


def test_read_committed_skips_aborted_records(spark, broker) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-rc-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for i, commit in enumerate((True, False, True)):
        p.begin_transaction()
        p.produce(topic, f"v{i}".encode())
        if commit:
            p.commit_transaction(30)
        else:
            p.flush()
            p.abort_transaction(30)

    def values(isolation: str) -> list[str]:
        df = (spark.read.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("kafka.isolation.level", isolation).load())
        return sorted(r.value.decode() for r in df.collect())

    assert values("read_committed") == ["v0", "v2"]
    assert values("read_uncommitted") == ["v0", "v1", "v2"]


def _expected(produced: list) -> collections.Counter:
    return collections.Counter(f"{p.value.decode()}@{p.partition}/{p.offset}".encode() for p in produced)


def _task_results(log: str) -> list[tuple[int, int, bool]]:
    """The (partition, records, written) of every task, from the job's COMMIT line of batch 0."""
    line = next(x for x in log.splitlines() if x.startswith("COMMIT 0 "))
    return [tuple(t) for t in ast.literal_eval(line[len("COMMIT 0 "):])]


def test_task_retries_write_each_partition_once(broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """One transaction per task: attempt 0 of partition 1 fails after committing, attempt 0 of partition 2 fails
    with its transaction open; Spark retries both (local[2,4]: up to 4 attempts) and the retries find the marker
    (partition 1: nothing written again) or the aborted transaction (partition 2: written once, by attempt 1)."""
    source, sink = f"eos-in-{uuid.uuid4().hex[:8]}", f"eos-out-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, sink, 2)
    produced = produce(broker.bootstrap, source, [(f"k{i % 7}", f"a{i}") for i in range(1500)])
    log_path = tmp_path / "retry.log"
    job = _submit(broker.bootstrap, source, sink, tmp_path, "retry", log_path, job=JOBS / "eos_faults.py",
                  master="local[2,4]")
    try:
        assert job.wait(400) == 0, log_path.read_text()[-4000:]
    finally:
        _kill_group(job)
    log = log_path.read_text()
    assert "injected: task fails after its transaction committed" in log
    assert "injected: task fails with its transaction open" in log
    results = {p: (records, written) for p, records, written in _task_results(log)}
    assert results[1][1] is False and results[1][0] > 0, results  # the retry found attempt 0's marker
    assert results[0][1] and results[2][1], results
    assert sum(r for r, _ in results.values()) == 1500
    got = collections.Counter(read_committed(broker.bootstrap, sink, 2))
    assert got == _expected(produced)  # every record once: none twice, none missed


def _stream_once(spark, bootstrap: str, source: str, sink: str, checkpoint: Path, sink_id: str,  # type: ignore[no-untyped-def]
                 value: str = "value") -> None:
    query = (
        spark.readStream.format("kbus").option("kafka.bootstrap.servers", bootstrap).option("subscribe", source)
        .option("startingOffsets", "earliest").load()
        .selectExpr("key", f"{value} AS value")
        .writeStream.format("kbus").option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.transactional.id", sink_id).option("topic", sink)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )
    try:
        query.awaitTermination(240)
    except Exception as exc:  # StreamingQueryException: the task's error is in its text
        raise RuntimeError(str(exc)) from None
    finally:
        query.stop()


def _uncommit_last(checkpoint: Path) -> None:
    last = _batches(checkpoint / "commits")[-1]
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)


def test_replay_with_other_rows_and_a_second_query_on_the_sink_id_are_refused(  # type: ignore[no-untyped-def]
        spark, broker, tmp_path: Path) -> None:
    source, sink = f"eos-in-{uuid.uuid4().hex[:8]}", f"eos-out-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 1)
    produce(broker.bootstrap, source, [(f"k{i}", f"v{i}") for i in range(200)])
    sink_id = f"eos-{sink}"
    first = tmp_path / "first"
    _stream_once(spark, broker.bootstrap, source, sink, first, sink_id)
    _uncommit_last(first)
    _stream_once(spark, broker.bootstrap, source, sink, first, sink_id)  # the same rows replayed: skipped
    assert len(read_committed(broker.bootstrap, sink, 1)) == 200
    _uncommit_last(first)
    with pytest.raises(RuntimeError, match="is now replayed with"):  # other values: the digest differs
        _stream_once(spark, broker.bootstrap, source, sink, first, sink_id, value="upper(CAST(value AS STRING))")
    with pytest.raises(RuntimeError, match="Two queries cannot share a sink id"):
        _stream_once(spark, broker.bootstrap, source, sink, tmp_path / "second", sink_id)
    assert len(read_committed(broker.bootstrap, sink, 1)) == 200  # nothing written twice


@pytest.mark.parametrize("scope", ["task", "batch"])
def test_batch_write_exactly_once_in_either_scope(spark, broker, scope: str) -> None:  # type: ignore[no-untyped-def]
    sink = f"eos-save-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, sink, 2)
    df = spark.range(0, 1000, 1, 4).selectExpr("CAST(id AS STRING) AS value")
    (df.write.format("kbus").option("kafka.bootstrap.servers", broker.bootstrap).option("topic", sink)
     .option("kafka.transactional.id", f"eos-{sink}").option("transactionScope", scope).mode("append").save())
    got = read_committed(broker.bootstrap, sink, 2)
    assert sorted(int(v) for v in got) == list(range(1000))
