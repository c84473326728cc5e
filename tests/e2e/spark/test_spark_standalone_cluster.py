"""The case-study job on a real Spark standalone cluster: a master and two workers (pyspark's own spark-class) on
loopback, the job submitted with `kbus spark-submit --master spark://...`, executors whose Python has no kbus (it
comes from the zip kbus spark-submit ships), partitions read in parallel on both workers (Spark's event log says
where each task ran), results equal to a local[2] run, and a worker killed mid-stream with the query still
finishing with every record counted once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from kbus.spark.jobs.bus_locations import DEFAULT_CONFIG, load_job
from kbus.spark.jobs.bus_locations import run as run_job
from tests.e2e.spark.helpers import create_topic, produce, submit_env
from tests.e2e.spark.standalone import EventLog, StandaloneCluster, python_without_kbus
from tests.e2e.spark.test_spark_submit_job import TRIPS, _haversine_km, _position

# two spark-submits of a few JVMs each: minutes on a loaded 2-core box, more than the default 300 s per test
pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "kbus" / "spark" / "jobs" / "bus_locations.py"
KBUS = Path(sys.executable).parent / "kbus"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    c = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        c.start(workers=2)
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    wrapper = python_without_kbus(tmp_path_factory.mktemp("executor-python"))
    imports = "import pyarrow, confluent_kafka, kbus"
    # (run elsewhere than the checkout, whose ./kbus would otherwise be importable)
    check = subprocess.run([str(wrapper), "-c", imports], capture_output=True, text=True, cwd=wrapper.parent)
    assert "No module named 'kbus'" in check.stderr  # the executors really lack kbus
    return wrapper


def _produce_fleet(bootstrap: str, topic: str, updates: int) -> int:
    """Every trip's positions, all in one 5-minute window (10 minutes ago, so its watermark has passed)."""
    window_start_ms = (int(time.time() * 1000) // 300_000) * 300_000 - 600_000
    for i in range(updates):
        batch = [(trip, "{}, {}".format(*_position(start, i))) for trip, start in TRIPS.items()]
        produce(bootstrap, topic, batch, timestamp_ms=window_start_ms + 1000 * i)
    return window_start_ms


def _job_yaml(tmp: Path, bootstrap: str, source: str, stats: str, **input_options: str) -> Path:
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    config["input"]["options"].update({"kafka.bootstrap.servers": bootstrap, "subscribe": source, **input_options})
    config["outputs"]["topic"]["options"].update({"kafka.bootstrap.servers": bootstrap, "topic": stats})
    config["outputs"]["parquet"]["path"] = str(tmp / "parquet")
    config["checkpoint"] = str(tmp / "checkpoint")
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "job.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _submit(master: str, job_yaml: Path, events: Path, executor_python: Path | None) -> subprocess.Popen:
    events.mkdir(parents=True, exist_ok=True)
    conf = {
        "spark.executor.memory": "512m",
        # the job's stateful aggregation in one task per executor (kbus's default, 4, runs two waves on 2 cores)
        "spark.sql.shuffle.partitions": "2",
        # start only once both executors are there, so the first stage is spread over both workers
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(events),
        "spark.eventLog.compress": "false",
    }
    if executor_python is not None:
        conf["spark.pyspark.python"] = str(executor_python)
    cmd = [str(KBUS), "spark-submit", "--master", master]
    for k, v in conf.items():
        cmd += ["--conf", f"{k}={v}"]
    cmd += [str(JOB), "--config", str(job_yaml), "--available-now"]
    env = submit_env(events.parent / f"{events.name}-jvm-tmp")
    # cwd outside the checkout: Python processes started with -m would import ./kbus from it and hide a missing one
    cwd = events.parent / f"{events.name}-cwd"
    cwd.mkdir(exist_ok=True)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=cwd)


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the driver JVM and the Python it started
            proc.wait(10)
    assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-6000:]}"
    return out


def _latest_rows(parquet: Path) -> dict[tuple[str, object], dict]:
    """The job's Parquet output, newest row per (trip, window) - read with pyarrow, not Spark."""
    import pyarrow.dataset as ds

    rows = ds.dataset(str(parquet), format="parquet", partitioning="hive").to_table().to_pylist()
    newest: dict[tuple[str, object], dict] = {}
    for row in sorted(rows, key=lambda r: int(r["batch_id"])):
        newest[(row["trip"], row["window_start"])] = {k: v for k, v in row.items() if k != "batch_id"}
    return newest


def _check_stats(rows: dict[tuple[str, object], dict], updates: int) -> None:
    assert sorted(trip for trip, _ in rows) == sorted(TRIPS)
    for (trip, _), row in rows.items():
        start = TRIPS[trip]
        assert row["updates"] == updates, (trip, row)
        assert (row["lat"], row["lon"]) == _position(start, updates - 1)
        expected = sum(_haversine_km(_position(start, i), _position(start, i + 1)) for i in range(updates - 1))
        assert row["distance_km"] == pytest.approx(expected, abs=0.002)


def test_case_study_job_reads_in_parallel_on_both_workers_and_matches_local(
    cluster: StandaloneCluster, executor_python: Path, spark, broker, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, updates = f"abc-bus-location-{suffix}", 10
    create_topic(broker.bootstrap, source, PARTITIONS)
    for run in ("cluster", "local"):
        create_topic(broker.bootstrap, f"abc-bus-stats-{run}-{suffix}", 1)
    _produce_fleet(broker.bootstrap, source, updates)

    t0 = time.monotonic()
    job = _job_yaml(tmp_path / "cluster", broker.bootstrap, source, f"abc-bus-stats-cluster-{suffix}")
    out = _finish(_submit(cluster.url, job, tmp_path / "events", executor_python), timeout=600)
    t_cluster = time.monotonic() - t0
    assert f"{len(TRIPS) * updates} location updates in 1 micro-batches" in out
    # the same job on local[2]: this session's SparkSession (a JVM already running), not another spark-submit
    job = _job_yaml(tmp_path / "local", broker.bootstrap, source, f"abc-bus-stats-local-{suffix}")
    run_job(load_job(job, available_now=True))
    print(f"cluster run {t_cluster:.1f}s, local run {time.monotonic() - t0 - t_cluster:.1f}s")

    on_cluster, local = _latest_rows(tmp_path / "cluster" / "parquet"), _latest_rows(tmp_path / "local" / "parquet")
    _check_stats(on_cluster, updates)
    assert on_cluster == local

    # Where the tasks ran: two executors, one on each worker (told apart by the worker web UI serving its logs)
    events = EventLog.read(tmp_path / "events")
    worker_ports = {w.ui_port for w in cluster.workers}
    assert set(events.executors.values()) == worker_ports, events.executors
    # the scan: the first stage with one task per topic partition
    read_stage = min(s for s, n in events.stage_tasks.items() if n == PARTITIONS)
    reads = [t for t in events.tasks if t.stage == read_stage and t.reason == "Success"]
    assert sorted(t.index for t in reads) == list(range(PARTITIONS))
    assert {events.executors[t.executor] for t in reads} == worker_ports
    # ... and at the same time: a task on one worker started before a task on the other had finished
    assert any(
        a.launch_ms < b.finish_ms and b.launch_ms < a.finish_ms
        for a in reads for b in reads if events.executors[a.executor] != events.executors[b.executor]
    ), reads
    print("read stage tasks:", [(t.index, t.executor, events.executors[t.executor]) for t in reads])
    # each worker ran its own executor JVM (with its own Python workers) for this application
    assert events.app.startswith("app-"), events.app
    for i in range(2):
        assert list((cluster.root / f"worker{i}" / events.app).glob("*/stderr")), f"worker{i} ran no executor"


def test_worker_killed_mid_stream_the_query_finishes_counting_every_record_once(
    cluster: StandaloneCluster, executor_python: Path, broker, tmp_path: Path  # type: ignore[no-untyped-def]
) -> None:
    suffix = uuid.uuid4().hex[:8]
    source, stats, updates = f"abc-bus-location-{suffix}", f"abc-bus-stats-{suffix}", 20
    create_topic(broker.bootstrap, source, PARTITIONS)
    create_topic(broker.bootstrap, stats, 1)
    _produce_fleet(broker.bootstrap, source, updates)
    total = len(TRIPS) * updates
    # ~5 micro-batches, so there is a stream to kill a worker in the middle of (after the second: 3 more follow)
    job = _job_yaml(tmp_path / "run", broker.bootstrap, source, stats, maxOffsetsPerTrigger=str(total // 5))
    commits = tmp_path / "run" / "checkpoint" / "commits"

    proc = _submit(cluster.url, job, tmp_path / "events", executor_python)
    deadline = time.monotonic() + 420
    while not (commits / "1").exists():
        assert proc.poll() is None, f"the job ended before its second micro-batch: {proc.communicate()}"
        assert time.monotonic() < deadline, "no second micro-batch committed in time"
        time.sleep(0.2)
    committed_at_kill = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    killed_at_ms = int(time.time() * 1000)
    cluster.kill_worker(1)
    out = _finish(proc, timeout=600)
    print(out.strip(), f"(worker 1 killed after batch {committed_at_kill})")

    committed = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    assert committed[-1] > committed_at_kill + 1, "the stream was not in the middle when the worker died"
    assert f"{total} location updates" in out  # every offset read once over all micro-batches
    _check_stats(_latest_rows(tmp_path / "run" / "parquet"), updates)  # and counted once

    events = EventLog.read(tmp_path / "events")
    dead_port = cluster.workers[1].ui_port
    dead = {e for e, port in events.executors.items() if port == dead_port}
    assert dead and dead <= set(events.removed), (events.executors, events.removed)
    survivor = {e for e, port in events.executors.items() if port == cluster.workers[0].ui_port}
    assert any(t.executor in survivor and t.launch_ms > killed_at_ms for t in events.tasks)
    assert not any(t.executor in dead and t.launch_ms > killed_at_ms + 1000 for t in events.tasks)
    print("executors removed:", events.removed, "tasks per executor after the kill:",
          {e: sum(1 for t in events.tasks if t.executor == e and t.launch_ms > killed_at_ms) for e in events.executors})
