"""Kafka 3.9's operations tools (kafka-log-dirs, ...) against kbus, and kbus's own commands printing what they print."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration


def test_log_dirs_describe_matches_kafkas_tool(kafka39: KafkaDistribution, tmp_path: Path) -> None:
    dirs = [tmp_path / f"disk{i}" for i in range(3)]
    b = BrokerProcess(tmp_path / "b", {"log.dirs": ",".join(map(str, dirs))}).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("ld-a", 5, 1), NewTopic("ld-b", 3, 1)])["ld-a"].result(30)
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(50):
            p.produce("ld-a", b"v%d" % i, partition=i % 5)
        assert p.flush(30) == 0
        for extra in ((), ("--topic-list", "ld-b"), ("--broker-list", "0")):
            args = ("--bootstrap-server", b.bootstrap, "--describe", *extra)
            theirs = kafka39.run("kafka-log-dirs", *args)
            ours = kbus("log-dirs", *args)
            assert theirs.returncode == 0, theirs.stderr
            assert ours.returncode == 0, ours.stderr
            assert ours.stdout == theirs.stdout  # byte for byte, JSON key and entry order included
        assert '"partition":"ld-a-4"' in ours.stdout and '"error":null' in ours.stdout
    finally:
        b.stop()
