"""`kbus spark-submit` runs the case-study job (bus locations -> per-trip stats) end to end on local[2]."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from kbus.spark.jobs.bus_locations import DEFAULT_CONFIG, JobConfigError, load_job
from tests.e2e.spark.helpers import consume_all, create_topic, produce, submit_env

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "kbus" / "spark" / "jobs" / "bus_locations.py"
KBUS = Path(sys.executable).parent / "kbus"

# The seed's six buses (Fleet example), each moving a little north-east with every update.
TRIPS = {
    "BLRHBL001": (13.071362, 77.461906),
    "BLRHBL002": (14.399654, 76.045834),
    "BLRHBL003": (15.183959, 75.137622),
    "BLRHBL004": (13.659576, 76.944675),
    "BLRHBL005": (12.981337, 77.596181),
    "BLRHBL006": (13.024843, 77.546983),
}
UPDATES = 10


def _position(start: tuple[float, float], i: int) -> tuple[float, float]:
    return round(start[0] + 0.001 * i, 6), round(start[1] + 0.0015 * i, 6)


def _haversine_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(math.sqrt(h))


def test_job_description_is_checked() -> None:
    spec = load_job(DEFAULT_CONFIG, bootstrap_server="127.0.0.1:1", available_now=True)
    assert spec.input_options["subscribe"] == "abc-bus-location"
    assert spec.input_options["kafka.bootstrap.servers"] == "127.0.0.1:1"
    assert spec.topic_options is not None and spec.topic_options["kafka.bootstrap.servers"] == "127.0.0.1:1"
    assert spec.trigger == {"availableNow": True}
    with pytest.raises(JobConfigError, match="cannot read"):
        load_job("/nonexistent/job.yaml")


@pytest.mark.spark
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(900)  # a JVM, a Python driver and two micro-batches: minutes on a loaded 2-core box
def test_spark_submit_runs_the_bus_location_pipeline(spark, broker, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:8]
    source, stats = f"abc-bus-location-{suffix}", f"abc-bus-stats-{suffix}"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, stats, 1)
    window_start_ms = (int(time.time() * 1000) // 300_000) * 300_000 - 600_000  # a whole 5-minute window
    for i in range(UPDATES):
        updates = [(trip, "{}, {}".format(*_position(start, i))) for trip, start in TRIPS.items()]
        produce(broker.bootstrap, source, updates, timestamp_ms=window_start_ms + 1000 * i)
    produce(broker.bootstrap, source, [("BLRHBL001", "not a position")], timestamp_ms=window_start_ms)

    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    config["input"]["options"].update({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": source})
    config["outputs"]["topic"]["options"].update({"kafka.bootstrap.servers": broker.bootstrap, "topic": stats})
    config["outputs"]["parquet"]["path"] = str(tmp_path / "parquet")
    config["checkpoint"] = str(tmp_path / "checkpoint")
    job_yaml = tmp_path / "job.yaml"
    job_yaml.write_text(yaml.safe_dump(config))

    cmd = [str(KBUS), "spark-submit", "--master", "local[2]", str(JOB), "--config", str(job_yaml), "--available-now"]
    env = submit_env(tmp_path / "jvm-tmp")
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=600)  # a bound on a hang (it took > 240 s at load 15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the JVM and the Python driver it started
            proc.wait(10)
    assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-5000:]}"
    assert f"{len(TRIPS) * UPDATES + 1} location updates" in out
    assert "INFO" not in err  # the quiet log4j2 config of kbus spark-submit is in effect

    from kbus.spark.jobs.bus_locations import latest_stats

    rows = {r.trip: r for r in latest_stats(spark, str(tmp_path / "parquet")).collect()}
    assert sorted(rows) == sorted(TRIPS)
    for trip, start in TRIPS.items():
        row = rows[trip]
        last = _position(start, UPDATES - 1)
        assert row.updates == UPDATES
        assert (row.lat, row.lon) == last
        expected = sum(_haversine_km(_position(start, i), _position(start, i + 1)) for i in range(UPDATES - 1))
        assert row.distance_km == pytest.approx(expected, abs=0.002)
        assert row.window_start == dt.datetime.fromtimestamp(window_start_ms / 1000, dt.UTC).replace(tzinfo=None)

    records = consume_all(broker.bootstrap, stats)
    published = {m.key().decode(): json.loads(m.value()) for m in records}
    assert sorted(published) == sorted(TRIPS)
    assert all(v["updates"] == UPDATES for v in published.values())


@pytest.mark.spark
@pytest.mark.integration
@pytest.mark.slow
def test_spark_submit_with_the_broker_down_says_so_in_one_line(tmp_path: Path) -> None:
    from tests.kbus_processes import free_port

    dead = f"127.0.0.1:{free_port()}"
    cmd = [str(KBUS), "spark-submit", "--master", "local[1]", str(JOB), "--bootstrap-server", dead,
           "--available-now"]
    env = submit_env(tmp_path / "jvm-tmp")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=tmp_path)
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 1
    # Spark's PythonRunner merges the Python driver's stderr into its stdout, so both are read; the JVM's notice
    # about Spark's incubator module is printed by every spark-submit, broker or not.
    lines = [ln for ln in (out + err).splitlines() if not ln.startswith("WARNING: Using incubator modules")]
    assert lines == [f"kbus: Could not connect to any broker ({dead}: Connection refused)"], (out + err)[-3000:]
