"""Apache Kafka's Java client (kafka-clients 3.9.x and 4.x, from Maven) against a real kbus broker: producer,
consumer groups and AdminClient, each a named check in tests/e2e/ecosystem/java run in one JVM per client version."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.ecosystem.java_checks import CHECKS, VERSIONS, JavaChecks
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

Runs = dict[str, tuple[dict[str, tuple[bool, str]], str]]

# consumer_group_protocol (KIP-848) waits for each assignment change until a member's next heartbeat: at Kafka's
# default interval (5 s) that check alone took most of a run's ~45 s
BROKER = {"group.consumer.heartbeat.interval.ms": "500"}


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("broker"), dict(BROKER)).start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def runs(java_checks: dict[str, JavaChecks], java_broker: BrokerProcess) -> Runs:
    """Every check of every version: one JVM per version, the versions' JVMs at the same time (most of a run is
    waiting on the broker: group joins, commits, transaction markers); their topics, groups and transactional ids
    differ by the suffix."""
    started = {v: java_checks[v].start(java_broker.bootstrap, f"c{v.replace('.', '')}") for v in VERSIONS}
    runs = {v: JavaChecks.results(proc) for v, proc in started.items()}
    for v, (results, _) in runs.items():  # a passed check's detail is its time
        print(f"kafka-clients {v}:", ", ".join(f"{check} {detail}" for check, (_, detail) in results.items()))
    return runs


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("check", CHECKS)
def test_java_client(check: str, version: str, runs: Runs) -> None:
    results, stderr = runs[version]
    assert check in results, f"kafka-clients {version}: no result for {check}; stderr:\n{stderr[-3000:]}"
    passed, detail = results[check]
    assert passed, f"kafka-clients {version}: {check}: {detail}\n{stderr[-3000:]}"
