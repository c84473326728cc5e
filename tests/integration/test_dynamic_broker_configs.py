"""Dynamic broker configs (`kbus configs --entity-type brokers`, AlterConfigs/IncrementalAlterConfigs on BROKER
resources): stored in /config/brokers/<default> and /config/brokers/<id> as Kafka stores them, with change
notifications, applied without a restart, shown with their source by DescribeConfigs. Real 3-broker cluster."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.kbus_processes import kbus, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def produce_all_acks(bootstrap: str, topic: str) -> str | None:
    """The error of one acks=all send, None when it is acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 5000, "retries": 0,
                  "log_level": 0})  # fmt: skip
    errors: list[str | None] = []
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(None if err is None else err.name()))
    p.flush(15)
    return errors[0] if errors else "no delivery report"


def topic_config(admin: AdminClient, topic: str, key: str) -> str:
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res])[res].result(30)[key].value


def test_cluster_default_and_per_broker_configs(cluster, raw_zk) -> None:
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("dyn-one", 1, replica_assignment=[[1]])])["dyn-one"].result(30)
    wait_for(lambda: cluster.partitions("dyn-one").get(0, (-1, []))[0] == 1, timeout=30, what="dyn-one")
    assert produce_all_acks(b, "dyn-one") is None

    res = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
               "--add-config", "log.retention.ms=3600000,min.insync.replicas=2")
    assert res.returncode == 0, res.stderr
    assert res.stdout == "Completed updating default config for brokers in the cluster.\n"
    # stored as Kafka stores it, with a change notification
    data, _ = raw_zk.get("/config/brokers/<default>")
    assert json.loads(data) == {"version": 1, "config": {"log.retention.ms": "3600000", "min.insync.replicas": "2"}}
    changes = [json.loads(raw_zk.get(f"/config/changes/{c}")[0]) for c in raw_zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "brokers/<default>"} in changes

    # applied without a restart: an RF=1 topic now needs 2 in-sync replicas for acks=all
    wait_for(lambda: topic_config(admin, "dyn-one", "retention.ms") == "3600000", timeout=20,
             what="the new log default on the topic")  # fmt: skip
    wait_for(lambda: produce_all_acks(b, "dyn-one") == "NOT_ENOUGH_REPLICAS", timeout=20,
             what="min.insync.replicas=2 enforced")  # fmt: skip

    shown = kbus("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers", "--entity-default")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}",
        "  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2}",
    ]

    # per broker: wins over the cluster-wide default on that broker only
    res = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-name", "1",
               "--add-config", "min.insync.replicas=1")
    assert res.stdout == "Completed updating config for broker 1.\n", res.stderr
    assert json.loads(raw_zk.get("/config/brokers/1")[0])["config"] == {"min.insync.replicas": "1"}
    wait_for(lambda: produce_all_acks(b, "dyn-one") is None, timeout=20, what="broker 1's own min.insync.replicas")
    one = kbus("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert one.stdout.splitlines() == [
        "Dynamic configs for broker 1 are:",
        "  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:min.insync.replicas=1, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2, DEFAULT_CONFIG:min.insync.replicas=1}",
    ]
    all_two = kbus("configs", "--bootstrap-server", b, "--describe", "--entity-type", "brokers", "--entity-name",
                   "2", "--all").stdout  # fmt: skip
    assert ("  min.insync.replicas=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=2, "
            "DEFAULT_CONFIG:min.insync.replicas=1}") in all_two.splitlines()
    assert any(ln.startswith("  zookeeper.session.timeout.ms=6000 sensitive=false synonyms={STATIC_BROKER_CONFIG:")
               for ln in all_two.splitlines())  # fmt: skip

    # keys Kafka only reads at start are refused, naming them
    bad = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
               "--add-config", "log.dirs=/elsewhere")
    assert bad.returncode == 1 and len(bad.stderr.splitlines()) == 1
    assert "Cannot update these configs dynamically: Set(log.dirs)" in bad.stderr
    bad_value = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
                     "--add-config", "min.insync.replicas=many")
    assert bad_value.returncode == 1 and "min.insync.replicas" in bad_value.stderr

    # removing the overrides: back to server.properties
    for args in (("--entity-default",), ("--entity-name", "1")):
        res = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", *args,
                   "--delete-config", "min.insync.replicas")
        assert res.returncode == 0, res.stderr
    wait_for(lambda: produce_all_acks(b, "dyn-one") is None, timeout=20, what="acks=all again")
    assert json.loads(raw_zk.get("/config/brokers/<default>")[0])["config"] == {"log.retention.ms": "3600000"}


def test_legacy_alter_configs_on_a_broker_resource_and_restart(cluster, raw_zk) -> None:
    """librdkafka's (non-incremental) AlterConfigs on a BROKER resource, as librdkafka's test 0081 does; the
    configs survive the broker's restart because they live in ZooKeeper."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "2", set_config={"log.cleaner.backoff.ms": "20000",
                                                               "log.segment.bytes": "2000000"})  # fmt: skip
    admin.alter_configs([res])[res].result(30)
    assert json.loads(raw_zk.get("/config/brokers/2")[0])["config"] == {
        "log.cleaner.backoff.ms": "20000", "log.segment.bytes": "2000000"}
    static = ConfigResource(ResourceType.BROKER, "2", set_config={"broker.id": "7"})
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        admin.alter_configs([static])[static].result(30)

    cluster.brokers[2].stop()
    cluster.start_broker(2)
    cluster.wait_until_all_see_each_other()
    admin = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    described = ConfigResource(ResourceType.BROKER, "2")
    entries = admin.describe_configs([described])[described].result(30)
    seg = entries["log.segment.bytes"]
    assert seg.value == "2000000" and seg.source == 2  # DYNAMIC_BROKER_CONFIG
    assert not seg.is_read_only and entries["broker.id"].is_read_only


def test_num_replica_fetchers_applies_without_a_restart(cluster) -> None:
    """Kafka's resizeThreadPool: the followers spread their partitions over N fetchers per leader (each its own
    connection to the leader) once the count changes; a count beyond double the current one is refused."""
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("fetchers", 8, replica_assignment=[[1, 2, 3]] * 8)])["fetchers"].result(30)
    wait_for(lambda: len(cluster.partitions("fetchers")) == 8
             and all(len(isr) == 3 for _, isr in cluster.partitions("fetchers").values()), timeout=30,
             what="full ISRs")  # fmt: skip
    too_many = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
                    "--add-config", "num.replica.fetchers=3")
    assert too_many.returncode != 0
    assert ("Dynamic thread count update validation failed for num.replica.fetchers=3, value should not be greater "
            "than double the current value 1") in too_many.stderr  # fmt: skip
    res = kbus("configs", "--bootstrap-server", b, "--alter", "--entity-type", "brokers", "--entity-default",
               "--add-config", "num.replica.fetchers=2")
    assert res.returncode == 0, res.stderr
    for i in (2, 3):
        wait_for(lambda i=i: "Replica fetchers per source broker: 2" in cluster.brokers[i].log_text(), timeout=20,
                 what=f"broker {i} resizing its fetchers")  # fmt: skip
    # replication goes on through the new fetchers: acks=all needs both followers
    p = Producer({"bootstrap.servers": b, "acks": "all", "log_level": 0})
    errors: list[object] = []
    for n in range(800):
        p.produce("fetchers", str(n).encode(), partition=n % 8,
                  on_delivery=lambda err, msg: err is None or errors.append(err))  # fmt: skip
    assert p.flush(30) == 0 and errors == []
    wait_for(lambda: all(len(isr) == 3 for _, isr in cluster.partitions("fetchers").values()), timeout=30,
             what="ISRs still full")
