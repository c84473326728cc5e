"""Fixtures for the ecosystem tests: Apache Kafka's jars (fetched once per session by scripts/kafka-jars.sh)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.ecosystem import jvm_tmp
from tests.e2e.ecosystem.connect_workers import Worker
from tests.e2e.ecosystem.java_checks import VERSIONS, JavaChecks, build
from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, distribution, tool_runners


@pytest.fixture(scope="session", autouse=True)
def jvm_tmp_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """java.io.tmpdir of the JVMs that session-wide helpers start (Kafka's tools, the Java checks): under this
    process's pytest base temp dir, not /tmp (tests/e2e/ecosystem/jvm_tmp.py)."""
    jvm_tmp.use_session_dir(tmp_path_factory.mktemp("jvm-tmp"))
    return jvm_tmp.session_dir()


@pytest.fixture(autouse=True)
def kafka_tool_runners() -> Iterator[None]:
    """A test's one-shot Kafka tools (kafka39.run("kafka-configs", ...)) run in one JVM of the test's own, started
    at its first call and ended with the test (tests/e2e/ecosystem/kafka_jars.py: ToolRunner)."""
    with tool_runners():
        yield


@pytest.fixture(scope="session")
def kafka39() -> KafkaDistribution:
    """Apache Kafka 3.9's broker and tools jars (the script's pinned 3.9.x)."""
    return distribution()


@pytest.fixture(scope="session")
def kafka28() -> KafkaDistribution:
    """Apache Kafka 2.8, whose tools still take --zookeeper."""
    return distribution("2.8.2")


@pytest.fixture(scope="session")
def java_checks() -> dict[str, JavaChecks]:
    """tests/e2e/ecosystem/java built once per session for each kafka-clients version (incremental Maven builds)."""
    return {v: build(v) for v in VERSIONS}


@pytest.fixture
def mirror_maker() -> Iterator[list[Worker]]:
    """MirrorMaker 2 processes a test started (`Worker.start("connect-mirror-maker.sh", ...)`), stopped after it."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()
