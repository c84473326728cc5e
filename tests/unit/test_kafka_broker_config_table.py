"""kbus's broker config table against Kafka's own (issue 28): every key Kafka 3.9.2 lists in DescribeConfigs for
a broker, with its type, default and whether AlterConfigs may change it at runtime (read_only), as that broker
answered (tests/unit/kafka_3_9_2_broker_configs.json: DescribeConfigs of a Kafka 3.9.2 broker, the default being
each key's DEFAULT_CONFIG synonym)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbus.common.broker_config import BROKER_CONFIGS, ConfigError, KafkaConfig
from kbus.common.broker_config_describe import config_banner, config_type, default_value
from kbus.common.dynamic_broker_config import DYNAMIC_BROKER_KEYS, START_ONLY_KEYS, check_dynamic_broker_configs
from kbus.common.other_broker_configs import OTHER_BROKER_CONFIGS

KAFKA = json.loads((Path(__file__).parent / "kafka_3_9_2_broker_configs.json").read_text())
# where kbus's default is knowingly not Kafka's text: the same map in another order, "" where kbus says null, and
# zookeeper.connection.timeout.ms, null in Kafka (then zookeeper.session.timeout.ms's 18000 applies), 18000 in kbus;
# group.coordinator.rebalance.protocols, Kafka 4's classic,consumer (KIP-848 is implemented);
# group.share.partition.max.record.locks, Kafka 4.4's 2000 (3.9's share groups were early access with 200)
DEFAULT_DIFFERENCES = {"listener.security.protocol.map", "authorizer.class.name", "process.roles",
                       "zookeeper.connection.timeout.ms", "group.coordinator.rebalance.protocols",
                       "group.share.partition.max.record.locks"}


def test_every_kafka_broker_key_is_defined_once() -> None:
    assert len(KAFKA) == 315
    assert set(KAFKA) <= {*BROKER_CONFIGS, *OTHER_BROKER_CONFIGS}
    assert not set(BROKER_CONFIGS) & set(OTHER_BROKER_CONFIGS)


@pytest.mark.parametrize("key", sorted(KAFKA))
def test_type_default_and_dynamic_as_kafka(key: str) -> None:
    kafka = KAFKA[key]
    assert config_type(key).name == kafka["type"]  # type: ignore[union-attr]
    assert (key not in DYNAMIC_BROKER_KEYS) == kafka["read_only"]
    if key not in DEFAULT_DIFFERENCES:
        assert default_value(key) == kafka["default"]


def test_kafkas_dynamic_keys_are_accepted_at_runtime() -> None:
    """sasl.kerberos.min.time.before.relogin was refused as static; Kafka's DynamicBrokerConfig has it."""
    check_dynamic_broker_configs({"sasl.kerberos.min.time.before.relogin": "120000",
                                  "log.cleaner.io.max.bytes.per.second": "1e6",
                                  "producer.id.expiration.ms": "3600000"})  # fmt: skip
    with pytest.raises(ConfigError, match=r"Cannot update these configs dynamically: Set\(broker\.id\)"):
        check_dynamic_broker_configs({"broker.id": "3"})
    with pytest.raises(ConfigError, match="Invalid value soon"):
        check_dynamic_broker_configs({"sasl.kerberos.min.time.before.relogin": "soon"})
    # dynamic in Kafka, read once at start by kbus: refused, saying so, rather than stored and not applied
    assert {"listeners", "ssl.keystore.location", "sasl.jaas.config"} <= START_ONLY_KEYS
    # the connection limits apply at once (kbus.server.network.socket_server), broker-wide and per listener
    assert "max.connections" not in START_ONLY_KEYS
    check_dynamic_broker_configs({"max.connections": "100", "listener.name.external.max.connection.creation.rate": "5"})
    with pytest.raises(ConfigError, match=r"Invalid max\.connections 0"):
        check_dynamic_broker_configs({"listener.name.external.max.connections": "0"})
    with pytest.raises(ConfigError, match="kbus applies these configs only at start"):
        check_dynamic_broker_configs({"ssl.keystore.location": "/tmp/k.jks"})


def test_keys_kbus_does_not_act_on_are_known_and_named() -> None:
    c = KafkaConfig.from_properties({"log.cleaner.dedupe.buffer.size": "1000000", "ssl.keystore.type": "PKCS12",
                                     "no.such.key": "1"})  # fmt: skip
    assert c.unknown_keys() == ["no.such.key"]
    assert c.ignored_keys() == ["log.cleaner.dedupe.buffer.size"]
    banner = config_banner(c)
    assert "\tlog.cleaner.dedupe.buffer.size = 1000000\n" in banner
    assert "\tssl.keystore.password = null\n" in banner and "\tsasl.kerberos.kinit.cmd = /usr/bin/kinit\n" in banner


def test_docs_list_every_key_kbus_does_not_act_on() -> None:
    from kbus.common.broker_config import is_security_key

    text = (Path(__file__).parents[2] / "docs" / "broker-configs.md").read_text()
    missing = [k for k in OTHER_BROKER_CONFIGS if not is_security_key(k) and f"| `{k}` |" not in text]
    assert not missing
