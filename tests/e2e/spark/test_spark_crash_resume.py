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

from tests.e2e.spark.helpers import create_topic, produce, submit_env
from tests.e2e.spark.jobs import stream_to_parquet

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parent / "jobs" / "stream_to_parquet.py"
KBUS = Path(sys.executable).parent / "kbus"


def _submit(bootstrap: str, topic: str, work: Path, mode: str, log: Path) -> subprocess.Popen:
    cmd = [str(KBUS), "spark-submit", "--master", "local[2]", str(JOB), bootstrap, topic, str(work), mode]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=submit_env(work / "jvm-tmp"),
                                start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    # The JVM and the Python driver it started: killing only the JVM leaves the driver behind.
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(10)


def _batches(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.glob("[0-9]*")) if directory.is_dir() else []


def assert_killed_driver_kept_to_its_tmp(work: Path) -> None:
    """The killed driver's Spark local dir was the one the test gave it (and so is removed with the test's tmp)."""
    assert list((work / "jvm-tmp").glob("blockmgr-*")), sorted((work / "jvm-tmp").iterdir())


def test_kill_9_mid_stream_then_restart_reads_everything_once(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topic = f"spark-crash-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 3)
    produced = produce(broker.bootstrap, topic, [(f"k{i % 11}", f"a{i}") for i in range(2000)])
    checkpoint = tmp_path / "checkpoint"

    running = _submit(broker.bootstrap, topic, tmp_path, "run", tmp_path / "run.log")
    try:
        deadline = time.monotonic() + 420  # a bound on a hang: a loaded CI box takes minutes
        while len(_batches(checkpoint / "commits")) < 2:  # maxOffsetsPerTrigger=500: 2000 records take 4 batches
            assert running.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no two committed micro-batches within 420 s"
            time.sleep(0.2)
        produced += produce(broker.bootstrap, topic, [(f"k{i % 11}", f"b{i}") for i in range(500)])
    finally:
        _kill_group(running)
    assert_killed_driver_kept_to_its_tmp(tmp_path)

    # Mimic the worst moment for a crash: the next batch's offsets are logged, its commit is not.
    offsets, commits = _batches(checkpoint / "offsets"), _batches(checkpoint / "commits")
    if offsets and commits and offsets[-1] == commits[-1]:
        (checkpoint / "commits" / str(commits[-1])).unlink()
        # and its Hadoop checksum file, which a real crash before the commit would not have written either
        (checkpoint / "commits" / f".{commits[-1]}.crc").unlink(missing_ok=True)

    # The restart: the same query from the same checkpoint, in another JVM (this session's, already running)
    resumed = stream_to_parquet.start(spark, broker.bootstrap, topic, str(tmp_path), "now")
    try:
        assert resumed.awaitTermination(420), "the resumed query did not finish within 420 s"
    finally:
        resumed.stop()
    assert resumed.exception() is None, resumed.exception()

    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    got = sorted((r.partition, r.offset, r.value) for r in rows)
    assert got == sorted((p.partition, p.offset, p.value.decode()) for p in produced)  # none twice, none missed
