"""A Kafka Streams application (kafka-streams 3.9.2 from Maven, exactly_once_v2) against kbus: word count with a
repartition topic and a state store whose changelog Streams creates; stopped and started again, it restores its
counts from the changelog and goes on counting, each line counted once."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.e2e.ecosystem.kafka_jars import REPO, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

POM = Path(__file__).resolve().parent / "streams" / "pom.xml"
VERSION = "3.9.2"  # kafka-streams 4.4.0 is not served by Maven Central here
LINE = "the quick brown fox jumps over the lazy dog"


@pytest.fixture(scope="module")
def streams_classpath() -> str:
    cmd = ["mvn", "-B", "-q", "-f", str(POM), f"-Dmaven.repo.local={REPO / '.cache' / 'm2'}",
           f"-Dkafka.version={VERSION}", "compile", "dependency:copy-dependencies"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout + out.stderr
    home = REPO / ".cache" / "streams" / VERSION
    return f"{home / 'classes'}:{home / 'libs'}/*"


def produce_lines(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce("wc-in", key=str(i), value=LINE)
    assert p.flush(30) == 0


def final_counts(bootstrap: str, want: dict[str, int], timeout: float = 120) -> dict[str, int]:
    """The latest committed count per word (read_committed), once it reaches `want` or the time is up."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wc-check-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})  # fmt: skip
    c.subscribe(["wc-out"])
    counts: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while counts != want and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                counts[m.key().decode()] = int(m.value().decode())
    c.close()
    return counts


@pytest.fixture
def run_app(streams_classpath: str, tmp_path: Path) -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(bootstrap: str) -> subprocess.Popen:
        log = open(tmp_path / f"streams-{len(procs)}.log", "w")  # noqa: SIM115 - as long as the process
        proc = subprocess.Popen(["java", "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp",
                                 streams_classpath, "kbus.streams.WordCount", bootstrap, "wc-app", "wc-in", "wc-out",
                                 "600"], stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        procs.append(proc)
        return proc

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)  # the shutdown hook closes Streams: its last transaction commits
    assert proc.wait(60) in (0, 143)


def test_word_count_exactly_once_restores_from_changelog(broker: BrokerProcess, run_app) -> None:
    bs = ("--bootstrap-server", broker.bootstrap)
    for topic, partitions in (("wc-in", "3"), ("wc-out", "2")):
        assert kbus("topics", *bs, "--create", "--topic", topic, "--partitions", partitions).returncode == 0
    produce_lines(broker.bootstrap, 50)
    want = {w: 50 for w in LINE.split()} | {"the": 100}
    app = run_app(broker.bootstrap)
    assert final_counts(broker.bootstrap, want) == want
    stop(app)
    listed = kbus("topics", *bs, "--list").stdout.split()
    changelog = "wc-app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-changelog"
    assert changelog in listed and "wc-app-KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition" in listed
    described = kbus("configs", *bs, "--entity-type", "topics", "--entity-name", changelog, "--describe").stdout
    assert "cleanup.policy=compact" in described  # as Streams created it

    # a second run restores the store from the changelog and counts only the new lines
    produce_lines(broker.bootstrap, 20)
    want = {w: 70 for w in LINE.split()} | {"the": 140}
    app = run_app(broker.bootstrap)
    assert final_counts(broker.bootstrap, want) == want
    stop(app)
