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


def test_java_producer_is_held_to_its_quota(kafka39: KafkaDistribution, broker_factory, zk_connect: str) -> None:
    """Kafka's own producer (kafka-producer-perf-test, Produce v9: KIP-219, the client backs off by itself) under
    a producer_byte_rate for its client.id set with Kafka's kafka-configs: the rate it reports stays near the
    quota. quota.window.num=2 so the first burst is one window's worth (Kafka's 11 windows allow ten)."""
    broker: BrokerProcess = broker_factory({"zookeeper.connect": zk_connect, "quota.window.num": "2"})
    bs = ("--bootstrap-server", broker.bootstrap)
    quota = 500 * 1024
    ok(kafka39.run("kafka-topics", *bs, "--create", "--topic", "kq-perf", "--partitions", "1"))
    ok(kafka39.run("kafka-configs", *bs, "--alter", "--entity-type", "clients", "--entity-name", "perf",
                   "--add-config", f"producer_byte_rate={quota}"))  # fmt: skip
    out = ok(kafka39.run("kafka-producer-perf-test", "--topic", "kq-perf", "--num-records", "3000", "--record-size",
                         "1000", "--throughput", "-1", "--producer-props", f"bootstrap.servers={broker.bootstrap}",
                         "client.id=perf", "acks=1"))  # fmt: skip
    last = out.strip().splitlines()[-1]  # "3000 records sent, R records/sec (M MB/sec), ..."
    assert last.startswith("3000 records sent, "), out
    mb_per_s = float(last.split("(")[1].split(" MB/sec")[0])
    assert mb_per_s * 1024 * 1024 < 2 * quota, last
