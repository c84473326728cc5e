"""Exactly-once Spark writes (kafka.transactional.id) and read_committed reads, with real Spark and a real broker.

The streaming job is killed -9 mid-stream and its last committed micro-batch is made to look uncommitted, so the
restarted query replays a batch whose output already reached Kafka: the sink's transaction marker must keep it
from being written twice. A plain at-least-once sink would duplicate it (Spark's own Kafka sink does)."""

from __future__ import annotations

import collections
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.e2e.spark.helpers import create_topic, produce
from tests.e2e.spark.test_spark_crash_resume import KBUS, _batches, _kill_group

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parent / "jobs" / "stream_exactly_once.py"


def _submit(bootstrap: str, source: str, sink: str, work: Path, mode: str, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    cmd = [str(KBUS), "spark-submit", "--master", "local[2]", str(JOB), bootstrap, source, sink, str(work), mode]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


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
    produced = produce(broker.bootstrap, source, [(f"k{i % 7}", f"a{i}") for i in range(3000)])
    checkpoint = tmp_path / "checkpoint"
    running = _submit(broker.bootstrap, source, sink, tmp_path, "run", tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 150
        while len(_batches(checkpoint / "commits")) < 2:
            assert running.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no committed micro-batch within 150 s"
            time.sleep(0.5)
    finally:
        _kill_group(running)
    commits = _batches(checkpoint / "commits")
    # the worst moment: the last batch's output is committed in Kafka but not in Spark's checkpoint
    (checkpoint / "commits" / str(commits[-1])).unlink()
    (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)
    resumed = _submit(broker.bootstrap, source, sink, tmp_path, "now", tmp_path / "now.log")
    try:
        assert resumed.wait(240) == 0, (tmp_path / "now.log").read_text()[-3000:]
    finally:
        _kill_group(resumed)
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
