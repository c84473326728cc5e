"""Exactly-once writes from the tasks on a real standalone cluster (a master and two workers on two loopback
addresses, so Spark sees two hosts and runs speculative copies): a speculative twin of a stalled task, then a worker
killed -9 in the middle of a micro-batch whose tasks hold open transactions. A read_committed consumer must see
every record exactly once."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.spark.helpers import create_topic, produce, submit_env
from tests.e2e.spark.standalone import EventLog, StandaloneCluster
from tests.e2e.spark.test_spark_exactly_once import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

JOB = Path(__file__).resolve().parent / "jobs" / "eos_faults.py"
KBUS = Path(sys.executable).parent / "kbus"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone-eos"))
    try:
        c.start(workers=2, hosts=("127.0.0.1", "127.0.0.2"))
        yield c
    finally:
        c.stop()


def _submit(master: str, bootstrap: str, source: str, sink: str, work: Path, log: Path) -> subprocess.Popen:
    conf = {
        "spark.executor.memory": "512m",
        "spark.pyspark.python": sys.executable,
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.speculation": "true",
        "spark.speculation.interval": "500ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "2",
        "spark.speculation.minTaskRuntime": "5s",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(work / "events"),
        "spark.eventLog.compress": "false",
    }
    (work / "events").mkdir(parents=True, exist_ok=True)
    cmd = [str(KBUS), "spark-submit", "--master", master]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [str(JOB), bootstrap, source, sink, str(work), "cluster"]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=submit_env(work / "jvm-tmp"),
                                start_new_session=True, cwd=work)


def test_speculative_twin_and_worker_killed_mid_batch_write_every_record_once(
    cluster: StandaloneCluster, broker, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    source, sink = f"eosc-in-{uuid.uuid4().hex[:8]}", f"eosc-out-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, source, 4)
    create_topic(broker.bootstrap, sink, 2)
    # maxOffsetsPerTrigger=400: batches 0, 1 and 2; the worker dies in batch 2, which the other worker then redoes
    produced = produce(broker.bootstrap, source, [(f"k{i % 11}", f"c{i}") for i in range(1200)])
    checkpoint, log = tmp_path / "checkpoint", tmp_path / "job.log"
    job = _submit(cluster.url, broker.bootstrap, source, sink, tmp_path, log)
    try:
        # mid-batch: batch 2 planned (offsets/2), not committed; its tasks hold open transactions for 3 s
        deadline = time.monotonic() + 420
        while not ((checkpoint / "commits" / "1").exists() and (checkpoint / "offsets" / "2").exists()):
            assert job.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "batch 2 never started"
            time.sleep(0.2)
        time.sleep(1.5)
        assert not (checkpoint / "commits" / "2").exists()
        killed_at_ms = int(time.time() * 1000)
        cluster.kill_worker(1)
        assert job.wait(600) == 0, log.read_text()[-6000:]
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(10)
    expected = collections.Counter(f"{p.value.decode()}@{p.partition}/{p.offset}".encode() for p in produced)
    got = collections.Counter(read_committed(broker.bootstrap, sink, 2))
    assert got == expected  # every record once: none twice, none missed

    events = EventLog.read(tmp_path / "events")
    speculative = [t for t in events.tasks if t.speculative]
    assert speculative, "no speculative task ran"
    dead = {e for e, port in events.executors.items() if port == cluster.workers[1].ui_port}
    assert dead and dead <= set(events.removed), (events.executors, events.removed)
    lost = [t for t in events.tasks if t.executor in dead and t.finish_ms >= killed_at_ms]
    print("speculative tasks:", [(t.stage, t.index, t.executor, t.reason) for t in speculative],
          "tasks lost with the worker:", [(t.stage, t.index, t.reason) for t in lost])
