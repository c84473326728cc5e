"""Spark's own Kafka connector (format "kafka", the spark-sql-kafka-0-10 jar) against kbus, through
`kbus spark-submit --packages org.apache.spark:spark-sql-kafka-0-10_2.13:VERSION` from the local jar cache:
batch write and read, a stream from topic to topic resumed from its checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from kbus.spark.connector import CONNECTOR, connector_jars
from tests.e2e.ecosystem.kafka_jars import REPO, kbus
from tests.e2e.spark.helpers import submit_env
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]

# The newest spark-sql-kafka-0-10 Maven Central serves; pyspark 4.3.0's own (4.3.0) is not served there, and the
# 4.2 connector runs on Spark 4.3 (this test is the proof).
CONNECTOR_VERSION = "4.2.0"
JOB = Path(__file__).parent / "jobs" / "kafka_connector.py"


def read_all(bootstrap: str, topic: str, n: int) -> list[str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[str] = []
    for _ in range(60):
        got += [m.value().decode() for m in c.consume(1000, 1.0) if m.error() is None]
        if len(got) >= n:
            break
    c.close()
    return got


@pytest.fixture(scope="module")
def job_result(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    cache = REPO / ".cache"
    assert connector_jars(CONNECTOR_VERSION, cache)  # fetched once into the repo's cache (CI does it here)
    for topic, partitions in (("spk-src", "3"), ("spk-dst", "2")):
        r = kbus("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic, "--partitions",
                 partitions)  # fmt: skip
        assert r.returncode == 0, r.stderr
    work = tmp_path_factory.mktemp("spark-kafka")
    checkpoint = work / "checkpoint"
    env = {**submit_env(work / "jvm-tmp"), "KBUS_CACHE_DIR": str(cache)}
    cmd = [
        str(Path(sys.executable).parent / "kbus"), "spark-submit", "--master", "local[2]",
        "--packages", f"{CONNECTOR}:{CONNECTOR_VERSION}", str(JOB),
        broker.bootstrap, "spk-src", "spk-dst", str(checkpoint),
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, f"rc={out.returncode}\n{out.stdout[-3000:]}\n{out.stderr[-5000:]}"
    return {**json.loads(lines[-1].removeprefix("RESULT ")), "bootstrap": broker.bootstrap}


def test_batch_write_and_read(job_result: dict[str, object]) -> None:
    assert job_result["batch_rows"] == 300
    assert job_result["batch_keys_match"] is True  # key, value and header of each row belong together
    assert job_result["batch_partitions"] == [0, 1, 2]
    assert job_result["batch_topic"] == ["spk-src"]
    assert job_result["batch_offsets_dense"] is True
    assert job_result["ranged_rows_partition_0"] == 10  # startingOffsets/endingOffsets as JSON


def test_stream_topic_to_topic_resumes_from_checkpoint(job_result: dict[str, object]) -> None:
    assert job_result["stream_first_run"] == 300
    assert job_result["stream_second_run"] == 50  # only what arrived since the checkpoint
    assert job_result["dst_rows"] == job_result["dst_distinct"] == 350
    assert job_result["dst_upper"] is True
    assert job_result["kbus_same_rows"] is True
    # and an ordinary Kafka client sees what Spark's sink wrote
    values = read_all(str(job_result["bootstrap"]), "spk-dst", 350)
    assert sorted(values) == sorted(f"V{i}" for i in range(350))
