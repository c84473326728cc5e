"""A broker's configs as Kafka 3.9.2 reports them (issue 28), over the wire from a real broker with a real client:
DescribeConfigs lists Kafka's whole broker config set (315 keys; kbus listed 106) with types, sources, synonyms
and read-only flags, and AlterConfigs accepts the keys Kafka's DynamicBrokerConfig makes dynamic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

pytestmark = pytest.mark.integration

KAFKA = json.loads((Path(__file__).parent.parent / "unit" / "kafka_3_9_2_broker_configs.json").read_text())


def describe(admin: AdminClient, broker_id: str = "0") -> dict:
    res = ConfigResource(ResourceType.BROKER, broker_id)
    return admin.describe_configs([res])[res].result(30)


def test_describe_configs_lists_kafkas_whole_broker_config_set(broker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = describe(admin, "0")
    assert set(KAFKA) <= set(entries), sorted(set(KAFKA) - set(entries))[:20]
    for key, kafka in KAFKA.items():
        assert entries[key].is_read_only == kafka["read_only"], key
        assert entries[key].is_sensitive == kafka["sensitive"], key
    relogin = entries["sasl.kerberos.min.time.before.relogin"]  # a key kbus does not act on, with Kafka's default
    assert (relogin.value, relogin.source, relogin.is_read_only) == ("60000", 5, False)
    assert entries["log.cleaner.dedupe.buffer.size"].value == "134217728"
    assert entries["ssl.keystore.password"].value is None and entries["ssl.keystore.password"].is_sensitive


def test_kafkas_dynamic_broker_keys_change_at_runtime(broker) -> None:
    """AlterConfigs / IncrementalAlterConfigs refused sasl.kerberos.min.time.before.relogin as static."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    bid = "0"
    res = ConfigResource(ResourceType.BROKER, bid, incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", "120000",
                    incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    admin.incremental_alter_configs([res])[res].result(30)
    entry = describe(admin, bid)["sasl.kerberos.min.time.before.relogin"]
    assert (entry.value, entry.source) == ("120000", 2)  # DYNAMIC_BROKER_CONFIG
    static = ConfigResource(ResourceType.BROKER, bid, incremental_configs=[
        ConfigEntry("broker.id", "9", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically"):
        admin.incremental_alter_configs([static])[static].result(30)
    listeners = ConfigResource(ResourceType.BROKER, bid, incremental_configs=[
        ConfigEntry("listeners", "PLAINTEXT://:1", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    with pytest.raises(KafkaException, match="only at start"):
        admin.incremental_alter_configs([listeners])[listeners].result(30)
    back = ConfigResource(ResourceType.BROKER, bid, incremental_configs=[
        ConfigEntry("sasl.kerberos.min.time.before.relogin", None, incremental_operation=AlterConfigOpType.DELETE)])
    admin.incremental_alter_configs([back])[back].result(30)


def test_without_an_authorizer_every_supported_operation_is_authorized(broker) -> None:
    """Kafka's AuthHelper.authorizedOperations with no authorizer: every operation the resource type supports
    (librdkafka's 0081 checks it); kbus reported none (or INT32_MIN). Checked against Kafka 3.9.2 with this client."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ops-noauth", 1, 1)])["ops-noauth"].result(30)
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=10).result()
    assert sorted(op.name for op in cluster.authorized_operations) == [
        "ALTER", "ALTER_CONFIGS", "CLUSTER_ACTION", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS", "IDEMPOTENT_WRITE"]
    topic = admin.describe_topics(TopicCollection(["ops-noauth"]), include_authorized_operations=True,
                                  request_timeout=10)["ops-noauth"].result()  # fmt: skip
    assert sorted(op.name for op in topic.authorized_operations) == [
        "ALTER", "ALTER_CONFIGS", "CREATE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS", "READ", "WRITE"]
    assert admin.describe_cluster(request_timeout=10).result().authorized_operations is None  # not asked for


def test_kafka_3_9_topic_configs_and_deletes_of_unknown_keys(broker) -> None:
    """What MirrorMaker 2 does when it syncs a Kafka 3.9 topic's configs (failed with 'Unknown topic config name:
    remote.log.delete.on.disable'): the 3.8/3.9 keys are known with Kafka's limits, and a DELETE of a key the
    broker does not know succeeds, as on a Kafka 3.9.2 broker (checked there: a DELETE of no.such.key is OK)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = "kafka39-configs"
    admin.create_topics([NewTopic(topic, 1, 1, config={"compression.gzip.level": "5"})])[topic].result(30)

    def alter(*entries: ConfigEntry) -> None:
        res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=list(entries))
        admin.incremental_alter_configs([res])[res].result(30)

    def delete(key: str) -> ConfigEntry:
        return ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)

    alter(delete("remote.log.delete.on.disable"), delete("compression.lz4.level"), delete("no.such.key"),
          ConfigEntry("compression.zstd.level", "7", incremental_operation=AlterConfigOpType.SET))  # fmt: skip
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(30)
    assert (entries["compression.gzip.level"].value, entries["compression.gzip.level"].source) == ("5", 1)
    assert (entries["compression.zstd.level"].value, entries["compression.zstd.level"].source) == ("7", 1)
    assert (entries["remote.log.copy.disable"].value, entries["remote.log.copy.disable"].is_default) == ("false", True)
    with pytest.raises(KafkaException, match=r"Unknown topic config name: no\.such\.key"):
        alter(ConfigEntry("no.such.key", "1", incremental_operation=AlterConfigOpType.SET))
    with pytest.raises(KafkaException, match="under Zookeeper's mode"):
        alter(ConfigEntry("remote.log.copy.disable", "true", incremental_operation=AlterConfigOpType.SET))
    with pytest.raises(KafkaException, match="between 1 and 9 or equal to -1"):
        alter(ConfigEntry("compression.gzip.level", "10", incremental_operation=AlterConfigOpType.SET))
