"""Seed article 002 word for word (ZooKeeper mode, `--zookeeper` on the consumer, an em dash before `topic`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.test_cli import kbus
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.zookeeper, pytest.mark.integration]


def test_seed_002_hello_kafka_through_zookeeper(tmp_path: Path, zk_connect: str) -> None:
    broker = BrokerProcess(tmp_path / "broker", {"zookeeper.connect": zk_connect, "broker.id": "0"}).start()
    try:
        made = kbus("topics", "--create", "--zookeeper", zk_connect, "--replication-factor", "1", "--partitions", "1",
                    "--topic", "Hello-Kafka")
        assert made.returncode == 0, made.stderr
        deadline = time.monotonic() + 30
        while "Leader: 0" not in kbus("topics", "--describe", "--bootstrap-server", broker.bootstrap,
                                      "--topic", "Hello-Kafka").stdout:
            assert time.monotonic() < deadline, "the controller never elected a leader"
            time.sleep(0.3)
        sent = kbus("console-producer", "--broker-list", broker.bootstrap, "--topic", "Hello-Kafka",
                    stdin="The first message\n")
        assert sent.returncode == 0, sent.stderr
        got = kbus("console-consumer", "--zookeeper", zk_connect, "\u2014topic", "Hello-Kafka", "--from-beginning",
                   "--max-messages", "1", "--timeout-ms", "20000")
        assert got.returncode == 0, got.stderr
        assert got.stdout == "The first message\n"

        # Kafka 2.x's kafka-configs.sh --zookeeper for topic overrides.
        changed = kbus("configs", "--zookeeper", zk_connect, "--entity-type", "topics", "--entity-name", "Hello-Kafka",
                       "--alter", "--add-config", "retention.ms=3600000")
        assert changed.returncode == 0, changed.stderr
        assert changed.stdout == "Completed updating config for entity: topic 'Hello-Kafka'.\n"
        shown = kbus("configs", "--zookeeper", zk_connect, "--entity-type", "topics", "--entity-name", "Hello-Kafka",
                     "--describe")
        assert shown.stdout == "Configs for topic 'Hello-Kafka' are retention.ms=3600000\n"

        # One topic-config table: the same limit and Kafka's message whether the tool writes to ZooKeeper or asks
        # the broker (min.insync.replicas=0 used to pass through --zookeeper).
        for where in (["--zookeeper", zk_connect], ["--bootstrap-server", broker.bootstrap]):
            refused = kbus("configs", *where, "--entity-type", "topics", "--entity-name", "Hello-Kafka", "--alter",
                           "--add-config", "min.insync.replicas=0")
            assert refused.returncode == 1, where
            assert "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in refused.stderr
            made = kbus("topics", "--create", *where, "--replication-factor", "1", "--partitions", "1",
                        "--topic", "no-isr", "--config", "min.insync.replicas=0")
            assert made.returncode == 1, where
            assert "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1" in made.stderr
    finally:
        broker.stop()
