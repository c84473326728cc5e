"""Transactions v2 with the Java client (kafka-clients 4.x) after the coordinator aborts a transaction on its
timeout: the producer aborts it too and goes on (Kafka 4 bumps the epoch once for that abort, so the producer's
abort is a retry of it). The same check (java-txn/TimeoutAbortCheck.java) against kbus and against Apache Kafka 4.x
in KRaft mode, so it is known valid on Kafka."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ecosystem.kafka_jars import default_version, fetch
from tests.e2e.ecosystem.kafka_kraft import kafka4_kraft
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent / "java-txn" / "TimeoutAbortCheck.java"
TIMEOUT_MS = 2000
# the coordinator's sweep for timed-out transactions, on both brokers
SWEEP = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def check_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    clients = fetch("--clients", default_version("4"))
    out = tmp_path_factory.mktemp("txn-check")
    subprocess.run(["javac", "-d", str(out), "-cp", f"{clients}/*", str(SOURCE)], check=True, timeout=120)
    return out, clients


def run_check(classes: tuple[Path, Path], bootstrap: str) -> None:
    out, clients = classes
    tag = uuid.uuid4().hex[:8]
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", f"{out}:{clients}/*", "TimeoutAbortCheck", bootstrap, f"txn-{tag}",
         f"tid-{tag}", str(TIMEOUT_MS)],
        capture_output=True, text=True, timeout=180)
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT")]
    assert results == ["RESULT PASS"], f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka4_kraft(tmp_path_factory.mktemp("kafka4"), SWEEP) as bootstrap:
        yield bootstrap


def test_timeout_abort_on_apache_kafka_4(check_classes: tuple[Path, Path], kafka4: str) -> None:
    """The check itself, on Kafka: the test is valid when this passes."""
    run_check(check_classes, kafka4)


def test_timeout_abort_on_kbus(check_classes: tuple[Path, Path], tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, dict(SWEEP)).start()
    try:
        run_check(check_classes, broker.bootstrap)
    finally:
        broker.stop()
