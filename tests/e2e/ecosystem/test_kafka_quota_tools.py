"""Kafka's own kafka-configs against kbus for client quotas: Kafka 3.9's tool sets and describes quotas over
--bootstrap-server (AlterClientQuotas/DescribeClientQuotas on a kbus broker) and prints what `kbus configs` prints;
Kafka 2.8's --zookeeper tool and `kbus configs --zookeeper` write the same znodes and print the same lines."""

from __future__ import annotations

import pytest

from tests.e2e.ecosystem.kafka_jars import KafkaDistribution, kbus
from tests.kbus_processes import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def ok(result) -> str:
    assert result.returncode == 0, f"rc={result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def without_warnings(out: str) -> list[str]:
    """Kafka 2.8's --zookeeper tool prints a deprecation warning first."""
    return [ln for ln in out.splitlines() if not ln.startswith(("Warning:", "Use --bootstrap-server"))]


ENTITIES = [
    ("--entity-type", "users", "--entity-name", "alice"),
    ("--entity-type", "clients", "--entity-name", "app-1"),
    ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "app-1"),
    ("--entity-type", "users", "--entity-default"),
    ("--entity-type", "clients", "--entity-default"),
    ("--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default"),
]


def test_kafka39_kafka_configs_sets_and_describes_quotas_on_kbus(
    kafka39: KafkaDistribution, broker_factory, zk_connect: str
) -> None:
    broker: BrokerProcess = broker_factory({"zookeeper.connect": zk_connect})
    bs = ("--bootstrap-server", broker.bootstrap)
    for i, entity in enumerate(ENTITIES):
        add = f"producer_byte_rate={1024 * (i + 1)},consumer_byte_rate=2048,request_percentage=12.5"
        if i % 2:  # every other entity set by kbus's own command
            out = ok(kbus("configs", *bs, "--alter", *entity, "--add-config", add))
        else:
            out = ok(kafka39.run("kafka-configs", *bs, "--alter", *entity, "--add-config", add))
        assert out.startswith("Completed updating "), out
    # one entity, a default, and the listings of every user, every client and every user's clients
    for describe in [ENTITIES[2], ENTITIES[3], ("--entity-type", "users"), ("--entity-type", "clients"),
                     ("--entity-type", "users", "--entity-type", "clients")]:  # fmt: skip
        theirs = ok(kafka39.run("kafka-configs", *bs, "--describe", *describe))
        ours = ok(kbus("configs", *bs, "--describe", *describe))
        assert ours == theirs, describe
        assert "Quota configs for " in theirs
    # a bigger rate prints as Java prints a double
    ok(kafka39.run("kafka-configs", *bs, "--alter", *ENTITIES[1], "--add-config", "producer_byte_rate=10485760"))
    theirs = ok(kafka39.run("kafka-configs", *bs, "--describe", *ENTITIES[1]))
    assert "producer_byte_rate=1.048576E7" in theirs and ok(kbus("configs", *bs, "--describe", *ENTITIES[1])) == theirs
    # deleting, and Kafka's errors
    ok(kafka39.run("kafka-configs", *bs, "--alter", *ENTITIES[1], "--delete-config", "request_percentage"))
    assert "request_percentage" not in ok(kbus("configs", *bs, "--describe", *ENTITIES[1]))
    bad = kafka39.run("kafka-configs", *bs, "--alter", *ENTITIES[1], "--add-config", "producer_byte_rate=1.5")
    assert bad.returncode != 0 and "must be a LONG value" in bad.stdout + bad.stderr
    ours = kbus("configs", *bs, "--alter", *ENTITIES[1], "--add-config", "producer_byte_rate=1.5")
    assert ours.returncode != 0 and "must be a LONG value" in ours.stderr


def test_kafka28_zookeeper_quotas_match_kbus(
    kafka28: KafkaDistribution, broker_factory, zk_connect: str
) -> None:
    broker_factory({"zookeeper.connect": zk_connect})
    zk = ("--zookeeper", zk_connect)
    for i, entity in enumerate(ENTITIES):
        add = f"producer_byte_rate={1000 + i},consumer_byte_rate=2000"
        ours = ok(kbus("configs", *zk, "--alter", *entity, "--add-config", add))
        if i in (2, 3):  # Kafka's tool writes (the same) and prints the same
            assert without_warnings(ok(kafka28.run("kafka-configs", *zk, "--alter", *entity, "--add-config", add))) \
                == ours.splitlines(), entity  # fmt: skip
    for describe in [ENTITIES[2], ("--entity-type", "users"), ("--entity-type", "clients"),
                     ("--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients")]:  # fmt: skip
        theirs = without_warnings(ok(kafka28.run("kafka-configs", *zk, "--describe", *describe)))
        ours = ok(kbus("configs", *zk, "--describe", *describe)).splitlines()
        assert ours == theirs, describe
