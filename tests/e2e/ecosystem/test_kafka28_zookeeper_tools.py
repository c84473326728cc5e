"""Apache Kafka 2.8's --zookeeper tools (the seed article's `kafka-topics.sh --zookeeper`) writing Kafka's znodes
for a kbus broker in ZooKeeper mode: the broker serves what Kafka's own tools created, altered and deleted, and
`kbus topics --zookeeper` prints what Kafka's prints."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def ok(result) -> str:
    assert result.returncode == 0, f"rc={result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def eventually(probe: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_kafka28_zookeeper_topics_and_configs(
    kafka28: KafkaDistribution, kafka39: KafkaDistribution, broker_factory, zk_connect: str
) -> None:
    broker: BrokerProcess = broker_factory({"zookeeper.connect": zk_connect})
    zk = ("--zookeeper", zk_connect)
    bs = ("--bootstrap-server", broker.bootstrap)
    out = ok(kafka28.run("kafka-topics", *zk, "--create", "--topic", "zk-seed", "--partitions", "3",
                         "--replication-factor", "1"))  # fmt: skip
    assert out.strip() == "Created topic zk-seed."

    def partitions_served(n: int) -> Callable[[], bool]:
        def probe() -> bool:
            r = kafka39.run("kafka-get-offsets", *bs, "--topic", "zk-seed")
            return r.returncode == 0 and len(r.stdout.split()) == n

        return probe

    eventually(partitions_served(3), "the broker did not serve the topic Kafka's tool created")
    # the same describe and list, from Kafka's tool and from kbus's, byte for byte
    for args in (("--describe", "--topic", "zk-seed"), ("--list",)):
        kafka_out = ok(kafka28.run("kafka-topics", *zk, *args))
        assert kafka_out == ok(kbus("topics", *zk, *args)), args

    ok(kafka28.run("kafka-topics", *zk, "--alter", "--topic", "zk-seed", "--partitions", "5"))
    eventually(partitions_served(5), "the broker did not serve the partitions Kafka's tool added")

    out = ok(kafka28.run("kafka-configs", *zk, "--entity-type", "topics", "--entity-name", "zk-seed", "--alter",
                         "--add-config", "retention.ms=123456"))  # fmt: skip
    assert "Completed updating config for entity: topic 'zk-seed'." in out

    def config_served() -> bool:
        r = kafka39.run("kafka-configs", *bs, "--entity-type", "topics", "--entity-name", "zk-seed", "--describe")
        return "retention.ms=123456 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=123456" in r.stdout

    eventually(config_served, "the broker did not apply the config Kafka's tool wrote")
    described = ok(kafka28.run("kafka-configs", *zk, "--entity-type", "topics", "--entity-name", "zk-seed",
                               "--describe"))  # fmt: skip
    assert "Configs for topic 'zk-seed' are retention.ms=123456" in described.splitlines()

    ok(kafka28.run("kafka-topics", *zk, "--delete", "--topic", "zk-seed"))

    def gone() -> bool:
        return "zk-seed" not in ok(kafka39.run("kafka-topics", *bs, "--list")).split()

    eventually(gone, "the broker still serves the topic Kafka's tool deleted")
