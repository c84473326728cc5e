#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: unit tests, then integration tests against real
# broker processes, real Apache ZooKeeper, real clients and a real local Spark. Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check kbus tests
.venv/bin/mypy  # [tool.mypy] in pyproject.toml: kbus/, strict on kbus.server
# What the tests download (Apache Kafka's jars, the Java checks' Maven builds) is fetched here, once, not inside
# the first test that needs it: on a cold cache that would eat the test's own timeout.
scripts/kafka-jars.sh >/dev/null
scripts/kafka-jars.sh 2.8.2 >/dev/null
# Kafka 4.x's broker (KRaft) and its kafka-clients, for the share group check run against both kafka and kbus
scripts/kafka-jars.sh "$(scripts/kafka-jars.sh --default-version 4)" >/dev/null
scripts/kafka-jars.sh --clients "$(scripts/kafka-jars.sh --default-version 4)" >/dev/null
# Kafka Connect and MirrorMaker 2's runtimes, for every version tests/e2e/ecosystem/connect_workers.py runs
scripts/kafka-jars.sh --connect 3.9.2 >/dev/null
scripts/kafka-jars.sh --connect 4.1.1 >/dev/null
.venv/bin/python -c 'from tests.e2e.ecosystem.java_checks import VERSIONS, build; [build(v) for v in VERSIONS]'
.venv/bin/python -c 'from tests.e2e.ecosystem.streams_app import STREAMS_VERSIONS, build; [build(v) for v in STREAMS_VERSIONS]'
# Quix Streams, Faust and kaskade, each in its own venv under .cache/python-apps (their pins clash with kbus's)
scripts/python-apps.sh --all >/dev/null
# KBUS_TEST_WORKERS=N runs the tests on N pytest-xdist workers (tests/conftest.py: which tests share a worker or run
# alone on the machine); the default is one pytest process. Every whole run on 4 workers so far (sessions 14-17,
# five) had failures (one to three), each a different race or timing assumption under their load, while one process
# passed CI nine times in a row (bench/notes/suite-time-2026-11-27-s17.md). Extra args come last, so they may also
# say -n N.
xdist=()
if [ "${KBUS_TEST_WORKERS:-0}" != 0 ]; then xdist=(-n "$KBUS_TEST_WORKERS" --dist loadgroup); fi
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=15 "${xdist[@]}" "$@"
