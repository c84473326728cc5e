"""Apache Kafka's Java client (kafka-clients 3.9.x and 4.x, from Maven) against a real kbus broker: producer,
consumer groups and AdminClient, each a named check in tests/e2e/ecosystem/java run in one JVM per client version."""

from __future__ import annotations

import pytest

from tests.e2e.ecosystem.java_checks import CHECKS, VERSIONS, JavaChecks
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration

_runs: dict[str, tuple[dict[str, tuple[bool, str]], str]] = {}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("check", CHECKS)
def test_java_client(check: str, version: str, java_checks: dict[str, JavaChecks], broker: BrokerProcess) -> None:
    if version not in _runs:  # one JVM runs every check of a version, against the shared broker
        _runs[version] = java_checks[version].run(broker.bootstrap, f"c{version.replace('.', '')}")
    results, stderr = _runs[version]
    assert check in results, f"kafka-clients {version}: no result for {check}; stderr:\n{stderr[-3000:]}"
    passed, detail = results[check]
    assert passed, f"kafka-clients {version}: {check}: {detail}\n{stderr[-3000:]}"
