"""Transactions v2 with the Java client (kafka-clients 4.x) after the coordinator aborts a transaction on its
timeout: the producer aborts it too and goes on (Kafka 4 bumps the epoch once for that abort, so the producer's
abort is a retry of it). The same check (java-txn/TimeoutAbortCheck.java) against kbus and against Apache Kafka 4.x
in KRaft mode, so it is known valid on Kafka."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ecosystem.java_checks import SingleFileCheck
from tests.e2e.ecosystem.kafka_jars import default_version
from tests.e2e.ecosystem.kafka_kraft import kafka4_kraft
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SOURCE = Path(__file__).resolve().parent / "java-txn" / "TimeoutAbortCheck.java"
TIMEOUT_MS = 2000
# the coordinator's sweep for timed-out transactions, on both brokers
SWEEP = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}


@pytest.fixture(scope="module")
def check_classes(tmp_path_factory: pytest.TempPathFactory) -> SingleFileCheck:
    return SingleFileCheck.compile(SOURCE, tmp_path_factory.mktemp("txn-check"), default_version("4"))


def run_check(check: SingleFileCheck, bootstrap: str) -> None:
    tag = uuid.uuid4().hex[:8]
    check.run("TimeoutAbortCheck", bootstrap, f"txn-{tag}", f"tid-{tag}", str(TIMEOUT_MS), timeout=180)


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka4_kraft(tmp_path_factory.mktemp("kafka4"), SWEEP) as bootstrap:
        yield bootstrap


def test_timeout_abort_on_apache_kafka_4(check_classes: SingleFileCheck, kafka4: str) -> None:
    """The check itself, on Kafka: the test is valid when this passes."""
    run_check(check_classes, kafka4)


def test_timeout_abort_on_kbus(check_classes: SingleFileCheck, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, dict(SWEEP)).start()
    try:
        run_check(check_classes, broker.bootstrap)
    finally:
        broker.stop()
