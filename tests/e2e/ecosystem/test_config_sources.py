"""DescribeConfigs' sources and synonyms against Apache Kafka's: Kafka 3.9's kafka-configs describes a kbus topic
and broker whose configs come from every layer (server.properties, the cluster-wide dynamic default, the broker's
own dynamic configs, the topic's overrides) and must print what Apache Kafka 3.9.2 printed for the same layers
(recorded/kafka-3.9.2-config-sources.txt, recorded by recorded/config_sources.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution
from tests.kbus_processes import BrokerProcess

pytestmark = pytest.mark.integration
RECORDED = Path(__file__).parent / "recorded" / "kafka-3.9.2-config-sources.txt"
# config/server.properties' log keys and min.insync.replicas=1, as in the recording
STATIC = {"log.retention.hours": "168", "log.segment.bytes": "1073741824", "message.max.bytes": "1048588",
          "log.index.interval.bytes": "4096", "log.retention.check.interval.ms": "300000",
          "min.insync.replicas": "1"}  # fmt: skip
# Kafka keys kbus does not have: KRaft's metadata log, the log-start-offset checkpoint; and one the test broker
# sets statically (tests/kbus_processes.py)
NOT_IN_KBUS = {"metadata.log.segment.bytes", "log.flush.start.offset.checkpoint.interval.ms",
               "log.flush.offset.checkpoint.interval.ms"}  # fmt: skip


def by_key(lines: list[str]) -> dict[str, str]:
    return {ln.split("=", 1)[0].strip(): ln for ln in lines if ln.startswith("  ")}


def run(kafka39: KafkaDistribution, *args: str) -> str:
    result = kafka39.run(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def test_topic_and_broker_config_sources_are_kafkas(kafka39: KafkaDistribution, broker_factory) -> None:
    broker: BrokerProcess = broker_factory(STATIC)
    bs = ("--bootstrap-server", broker.bootstrap)
    run(kafka39, "kafka-configs", *bs, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
        "log.retention.ms=3600000,min.insync.replicas=1,log.cleaner.delete.retention.ms=3600000,log.roll.ms=360000000")
    run(kafka39, "kafka-configs", *bs, "--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config",
        "log.segment.bytes=536870912,min.insync.replicas=1")
    run(kafka39, "kafka-topics", *bs, "--create", "--topic", "t", "--partitions", "1", "--replication-factor", "1",
        "--config", "retention.ms=7200000", "--config", "segment.ms=600000")
    topic = ("--entity-type", "topics", "--entity-name", "t", "--describe")
    described_all = run(kafka39, "kafka-configs", *bs, *topic, "--all").splitlines()
    described = run(kafka39, "kafka-configs", *bs, *topic).splitlines()
    brokers = run(kafka39, "kafka-configs", *bs, "--entity-type", "brokers", "--entity-name", "0", "--describe",
                  "--all").splitlines()  # fmt: skip

    kafka_all, kafka_dynamic, kafka_broker = RECORDED.read_text().split("====\n")
    assert described_all[0] == kafka_all.splitlines()[0] == "All configs for topic t are:"
    expected = {k: v for k, v in by_key(kafka_all.splitlines()).items() if k not in NOT_IN_KBUS}
    assert by_key(described_all) == expected
    assert described == kafka_dynamic.splitlines()
    ours = by_key(brokers)
    for key, line in by_key(kafka_broker.splitlines()).items():
        if key not in NOT_IN_KBUS:
            assert ours.get(key) == line
