from __future__ import annotations

import pytest

from kbus.common.broker_config import BROKER_CONFIGS, ConfigError, KafkaConfig
from kbus.common.broker_config_describe import ConfigSource as S
from kbus.common.broker_config_describe import config_synonyms, topic_broker_synonym
from kbus.common.dynamic_broker_config import DYNAMIC_BROKER_KEYS, check_dynamic_broker_configs


def test_defaults_are_kafkas():
    c = KafkaConfig.load(None)
    assert c.num_partitions == 1 and c.default_replication_factor == 1
    assert c.log_segment_bytes == 1073741824 and c.message_max_bytes == 1048588
    assert c.socket_request_max_bytes == 104857600 and c.auto_create_topics_enable
    assert [str(x) for x in c.listeners] == ["PLAINTEXT://:9092"]
    assert str(c.log_dirs[0]) == "/tmp/kafka-logs"


def test_file_and_overrides(tmp_path):
    f = tmp_path / "server.properties"
    f.write_text("broker.id=3\nlisteners=PLAINTEXT://127.0.0.1:9999\nlog.dirs=/a,/b\nnum.partitions=2\n")
    c = KafkaConfig.load(f, ["num.partitions=5", "auto.create.topics.enable=false"])
    assert c.broker_id == 3 and c.num_partitions == 5 and not c.auto_create_topics_enable
    assert [str(p) for p in c.log_dirs] == ["/a", "/b"]
    assert c.advertised_listeners[0].host == "127.0.0.1"


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("num.partitions=abc", "num.partitions"),
        ("num.partitions=0", "num.partitions"),
        ("listeners=nonsense", "listeners"),
        ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
        ("log.message.timestamp.type=Other", "log.message.timestamp.type"),
        ("novalue", "--override"),
    ],
)
def test_bad_values_name_the_key(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        KafkaConfig.load(None, [override])


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        KafkaConfig.load(tmp_path / "nope.properties")


def test_every_key_is_defined_once_with_its_default() -> None:
    c = KafkaConfig()
    for key, spec in BROKER_CONFIGS.items():
        assert getattr(c, spec.attr) == spec.default, key
    assert len({spec.attr for spec in BROKER_CONFIGS.values()}) == len(BROKER_CONFIGS)
    # a broker default of a topic config takes the topic table's default
    assert BROKER_CONFIGS["log.segment.bytes"].default == c.log_defaults.segment_bytes
    assert BROKER_CONFIGS["log.retention.ms"].default is None  # Kafka's null: log.retention.hours decides


def test_keys_kbus_reads_are_typed() -> None:
    c = KafkaConfig.from_properties({
        "auto.leader.rebalance.enable": "false", "broker.rack": "r1", "offsets.commit.timeout.ms": "7000",
        "leader.imbalance.check.interval.seconds": "5", "offset.metadata.max.bytes": "10",
    })
    assert not c.auto_leader_rebalance_enable and c.broker_rack == "r1" and c.offsets_commit_timeout_ms == 7000
    assert c.leader_imbalance_check_interval_seconds == 5 and c.offset_metadata_max_bytes == 10
    assert c.unknown_keys() == []


def test_unknown_keys_are_listed_for_kafkas_warning() -> None:
    c = KafkaConfig.from_properties({"broker.id": "1", "no.such.key": "x", "log.segmant.bytes": "1"})
    assert c.unknown_keys() == ["no.such.key", "log.segmant.bytes"]


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "SSL://h:9093"}, "advertised.listeners"),
        ({"listeners": "CLIENT://127.0.0.1:9093"}, "listeners"),  # a name with no protocol, as Kafka refuses
        ({"security.inter.broker.protocol": "SSL"}, "security.inter.broker.protocol"),  # no SSL listener
        (
            {"listeners": "A://:1,B://:2", "listener.security.protocol.map": "A:SSL,B:SSL"},
            "security.inter.broker.protocol",
        ),
        ({"process.roles": "broker"}, "process.roles"),
    ],
)
def test_what_kbus_cannot_honour_is_refused_naming_the_key(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=f"^{named.replace('.', '[.]')}: ") as info:
        KafkaConfig.from_properties(props)
    assert "\n" not in str(info.value)


def test_connection_limits_at_kafkas_defaults_are_accepted() -> None:
    KafkaConfig.from_properties({"max.connections": "2147483647", "max.connections.per.ip": "2147483647",
                                 "max.connection.creation.rate": "2147483647"})  # fmt: skip


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip.overrides"),  # Kafka: zero only with overrides
        ({"listener.name.plaintext.max.connections": "0"}, "Invalid max.connections 0"),  # ListenerConnectionQuota
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "max.connections.per.ip.overrides"),  # no ':'
        ({"max.connections.per.ip.overrides": "bad/host:5"}, "contains invalid addresses : bad/host"),
        ({"max.connection.creation.rate": "-1"}, "max.connection.creation.rate"),
        ({"connections.max.idle.ms": "100"}, "should always be less than connections.max.idle.ms=100"),
        ({"connections.max.idle.ms": "500", "connection.failed.authentication.delay.ms": "600"}, "=600 should"),
    ],
)
def test_bad_connection_limits_are_refused_as_kafka_does(props: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", "[.]")) as info:
        KafkaConfig.from_properties(props)
    assert "\n" not in str(info.value)


def test_connection_limits_are_enforced_keys_not_refused() -> None:
    c = KafkaConfig.from_properties({"max.connections": "100", "max.connections.per.ip": "0",
                                     "max.connections.per.ip.overrides": "127.0.0.1:5,::1:3",
                                     "listener.name.plaintext.max.connection.creation.rate": "10"})  # fmt: skip
    assert c.max_connections == 100 and c.max_connections_per_ip == 0


def test_plaintext_under_another_name_is_fine() -> None:
    c = KafkaConfig.from_properties({
        "listeners": "CLIENT://127.0.0.1:9093", "listener.security.protocol.map": "CLIENT:PLAINTEXT",
        "inter.broker.listener.name": "CLIENT",
    })
    assert c.listeners[0].name == "CLIENT"


def test_config_synonyms_follow_kafkas_order_and_drop_what_precedes_the_key() -> None:
    def syn(key: str, own: dict[str, str], default: dict[str, str], static: dict[str, str]) -> list[tuple]:
        return [(s.source, s.name, s.value) for s in config_synonyms(key, own, default, static)]

    assert topic_broker_synonym("retention.ms") == "log.retention.ms"
    assert topic_broker_synonym("leader.replication.throttled.replicas") is None
    # per-broker, then cluster-wide, then server.properties, then Kafka's default, each over all synonyms
    assert syn("log.retention.ms", {}, {"log.retention.ms": "1"}, {"log.retention.hours": "2"}) == [
        (S.DYNAMIC_DEFAULT_BROKER_CONFIG, "log.retention.ms", "1"),
        (S.STATIC_BROKER_CONFIG, "log.retention.hours", "2"),
        (S.DEFAULT_CONFIG, "log.retention.hours", "168"),
    ]
    # nothing for log.retention.ms itself: Kafka's dropWhile leaves nothing (the source is then DEFAULT_CONFIG)
    assert syn("log.retention.ms", {}, {}, {"log.retention.hours": "2"}) == []
    assert syn("log.retention.hours", {}, {"log.retention.ms": "1"}, {}) == [
        (S.DEFAULT_CONFIG, "log.retention.hours", "168")
    ]
    assert syn("min.insync.replicas", {"min.insync.replicas": "2"}, {}, {}) == [
        (S.DYNAMIC_BROKER_CONFIG, "min.insync.replicas", "2"),
        (S.DEFAULT_CONFIG, "min.insync.replicas", "1"),
    ]


def test_only_the_winning_synonym_of_a_topic_default_is_dynamic() -> None:
    # Kafka: "Cannot update these configs dynamically: Set(log.roll.hours)"
    assert {"log.retention.ms", "log.roll.ms", "log.segment.bytes"} <= DYNAMIC_BROKER_KEYS
    assert not {"log.retention.hours", "log.retention.minutes", "log.roll.hours", "log.roll.jitter.hours",
                "log.flush.scheduler.interval.ms"} & DYNAMIC_BROKER_KEYS  # fmt: skip


def test_a_dynamic_thread_count_stays_within_half_and_double_of_the_current_one() -> None:
    current = KafkaConfig(num_io_threads=8, num_replica_fetchers=1)
    check_dynamic_broker_configs({"num.io.threads": "16", "num.replica.fetchers": "2"}, current)
    check_dynamic_broker_configs({"num.io.threads": "4"}, current)
    with pytest.raises(ConfigError, match=r"num\.io\.threads=3, value should be at least half the current value 8"):
        check_dynamic_broker_configs({"num.io.threads": "3"}, current)
    with pytest.raises(ConfigError, match="should not be greater than double the current value 1"):
        check_dynamic_broker_configs({"num.replica.fetchers": "3"}, current)
    check_dynamic_broker_configs({"num.network.threads": "30", "log.cleaner.threads": "4"}, current)  # no such rule
