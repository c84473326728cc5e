"""kill -9 of a running streaming job, then a restart from its checkpoint: every record lands in Parquet once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.e2e.spark.helpers import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parent / "jobs" / "stream_to_parquet.py"
KBUS = Path(sys.executable).parent / "kbus"


def _submit(bootstrap: str, topic: str, work: Path, mode: str, log: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    cmd = [str(KBUS), "spark-submit", "--master", "local[2]", str(JOB), bootstrap, topic, str(work), mode]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    # The JVM and the Python driver it started: killing only the JVM leaves the driver behind.
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def _batches(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.glob("[0-9]*")) if directory.is_dir() else []


def test_kill_9_mid_stream_then_restart_reads_everything_once(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-crash-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 3)
    produced = produce(broker.bootstrap, topic, [(f"k{i % 11}", f"a{i}") for i in range(3000)])
    checkpoint = tmp_path / "checkpoint"

    running = _submit(broker.bootstrap, topic, tmp_path, "run", tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 150
        while len(_batches(checkpoint / "commits")) < 2:  # maxOffsetsPerTrigger=500: 3000 records take 6 batches
            assert running.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no committed micro-batch within 150 s"
            time.sleep(0.5)
        produced += produce(broker.bootstrap, topic, [(f"k{i % 11}", f"b{i}") for i in range(1000)])
    finally:
        _kill_group(running)

    # Mimic the worst moment for a crash: the next batch's offsets are logged, its commit is not.
    offsets, commits = _batches(checkpoint / "offsets"), _batches(checkpoint / "commits")
    if offsets and commits and offsets[-1] == commits[-1]:
        (checkpoint / "commits" / str(commits[-1])).unlink()
        # and its Hadoop checksum file, which a real crash before the commit would not have written either
        (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)

    resumed = _submit(broker.bootstrap, topic, tmp_path, "now", tmp_path / "now.log")
    try:
        assert resumed.wait(240) == 0, (tmp_path / "now.log").read_text()[-3000:]
    finally:
        _kill_group(resumed)

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    assert got == sorted((p.partition, p.offset, p.value.decode()) for p in produced)  # none twice, none missed
