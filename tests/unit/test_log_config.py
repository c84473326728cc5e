from __future__ import annotations

import re

import pytest

from kbus.common.broker_config import ConfigError, KafkaConfig
from kbus.common.errors import InvalidConfigError
from kbus.common.topic_config import TOPIC_CONFIG_NAMES, LogConfig, validate_topic_configs


def test_kafka_defaults() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.index_interval_bytes == 4096
    assert c.segment_index_bytes == 10485760
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.cleanup_policy == "delete"
    assert c.file_delete_delay_ms == 60000
    assert c.flush_messages == 2**63 - 1 and c.flush_ms == 2**63 - 1


def test_from_properties_uses_topic_level_names() -> None:
    c = LogConfig.from_properties({
        "segment.bytes": "1024", "retention.ms": "-1", "retention.bytes": "4096", "segment.ms": "60000",
        "message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete", "max.message.bytes": "2000",
        "index.interval.bytes": "10", "flush.messages": "1", "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true", "compression.type": "ZSTD",
    })
    assert (c.segment_bytes, c.retention_ms, c.retention_bytes, c.segment_ms) == (1024, -1, 4096, 60000)
    assert c.log_append_time and c.delete_enabled and c.compact_enabled
    assert c.max_message_bytes == 2000 and c.index_interval_bytes == 10 and c.flush_messages == 1
    assert c.min_insync_replicas == 2 and c.unclean_leader_election_enable and c.compression_type == "zstd"


def test_with_overrides_keeps_base() -> None:
    base = LogConfig.from_properties({"segment.bytes": "1024"})
    c = base.with_overrides({"retention.ms": "5"})
    assert (c.segment_bytes, c.retention_ms) == (1024, 5)
    assert base.retention_ms == 604800000


@pytest.mark.parametrize(("key", "value"), [
    ("segment.bytes", "abc"), ("segment.bytes", "10"), ("segment.ms", "0"), ("retention.ms", "-2"),
    ("message.timestamp.type", "WallClock"), ("cleanup.policy", "shred"), ("unclean.leader.election.enable", "yes"),
    ("min.cleanable.dirty.ratio", "1.5"), ("compression.type", "brotli"), ("no.such.config", "1"),
])
def test_bad_values_raise_invalid_config_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        LogConfig.from_properties({key: value})
    with pytest.raises(InvalidConfigError, match=key.replace(".", r"\.")):
        validate_topic_configs({key: value})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"),
        ("segment.bytes", "abc", "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("retention.ms", "x", "Not a number of type LONG"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("message.timestamp.type", "x", "String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1.0"),
        ("no.such.config", "1", "Unknown topic config name: no.such.config"),
    ],
)
def test_kafkas_messages(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message.replace(".", r"\.")):
        validate_topic_configs({key: value})


def test_deleting_any_key_is_valid() -> None:
    """Kafka 3.9's IncrementalAlterConfigs accepts a DELETE of a key it does not know (checked against a Kafka
    3.9.2 broker), and MirrorMaker 2 sends one for each key at its default on the source cluster."""
    validate_topic_configs({"retention.ms": None})
    validate_topic_configs({"retention.msx": None, "some.future.kafka.key": None})
    with pytest.raises(InvalidConfigError, match="Unknown topic config name"):
        validate_topic_configs({"retention.msx": "1"})


def broker_log_defaults(props: dict[str, str]) -> LogConfig:
    return KafkaConfig.from_properties(props).log_defaults


def test_broker_log_keys_are_the_topic_defaults() -> None:
    c = broker_log_defaults({
        "log.segment.bytes": "2048", "log.retention.hours": "1", "log.retention.bytes": "99",
        "message.max.bytes": "5000", "log.index.interval.bytes": "128", "log.roll.hours": "2",
        "log.message.timestamp.type": "LogAppendTime", "broker.id": "0", "listeners": "PLAINTEXT://:9092",
        "log.cleaner.min.cleanable.ratio": "0.25", "log.preallocate": "true", "min.insync.replicas": "2",
    })
    assert c.segment_bytes == 2048 and c.retention_ms == 3_600_000 and c.retention_bytes == 99
    assert c.max_message_bytes == 5000 and c.index_interval_bytes == 128 and c.segment_ms == 7_200_000
    assert c.log_append_time and c.min_cleanable_dirty_ratio == 0.25 and c.preallocate
    assert c.min_insync_replicas == 2
    # the finest unit wins, as in Kafka
    assert broker_log_defaults({"log.retention.hours": "1", "log.retention.ms": "10"}).retention_ms == 10
    assert broker_log_defaults({"log.retention.hours": "1", "log.retention.minutes": "2"}).retention_ms == 120_000
    assert broker_log_defaults({"log.retention.hours": "-1"}).retention_ms == -1
    assert broker_log_defaults({}) == LogConfig()


@pytest.mark.parametrize(
    ("key", "value"),
    [("log.segment.bytes", "10"), ("min.insync.replicas", "0"), ("log.retention.hours", "-2"),
     ("log.cleanup.policy", "shred"), ("log.message.timestamp.type", "Other")],
)
def test_broker_log_keys_have_the_topic_limits(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"configuration {key}:"):
        KafkaConfig.from_properties({key: value})


def test_to_properties_round_trip_and_diff() -> None:
    c = LogConfig.from_properties({"retention.ms": "123", "cleanup.policy": "compact"})
    props = c.to_properties()
    assert set(props) == set(TOPIC_CONFIG_NAMES)
    assert props["retention.ms"] == "123" and props["preallocate"] == "false"
    assert LogConfig.from_properties(props) == c
    assert c.diff(LogConfig()) == {"retention.ms": "123", "cleanup.policy": "compact"}


# Kafka 3.9.2's topic configs (LogConfig.configNames() with their ConfigDef defaults, printed from the 3.9.2 jars)
KAFKA_3_9_2_TOPIC_DEFAULTS = {
    "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.type": "producer", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.messages": "9223372036854775807", "flush.ms": "9223372036854775807",
    "follower.replication.throttled.replicas": "", "index.interval.bytes": "4096",
    "leader.replication.throttled.replicas": "", "local.retention.bytes": "-2", "local.retention.ms": "-2",
    "max.compaction.lag.ms": "9223372036854775807", "max.message.bytes": "1048588",
    "message.downconversion.enable": "true", "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": "9223372036854775807", "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.difference.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0", "min.insync.replicas": "1",
    "preallocate": "false", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}  # fmt: skip


def test_every_kafka_3_9_topic_config_with_its_default() -> None:
    """A Kafka 3.9 cluster's topics carry the 3.8/3.9 keys (compression levels, KIP-950's remote.log.*), and
    MirrorMaker 2 or a user copies them to kbus: each must be a known key there."""
    assert LogConfig().to_properties() == KAFKA_3_9_2_TOPIC_DEFAULTS


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("compression.gzip.level", "10", "Value must be between 1 and 9 or equal to -1"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "-131073", "Value must be at least -131072"),
        ("remote.log.copy.disable", "true", "It is invalid to set `remote.log.delete.on.disable` or "
                                            "`remote.log.copy.disable` under Zookeeper's mode."),
        ("remote.log.delete.on.disable", "true", "under Zookeeper's mode"),
    ],
)  # fmt: skip
def test_kafka_3_9_topic_configs_limits(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        validate_topic_configs({key: value})


def test_kafka_3_9_topic_configs_accepted() -> None:
    validate_topic_configs({"compression.gzip.level": "-1", "compression.lz4.level": "17",
                            "compression.zstd.level": "-5", "remote.log.copy.disable": "false",
                            "remote.log.delete.on.disable": "false"})  # fmt: skip
    c = KafkaConfig.from_properties({"compression.zstd.level": "7"})
    assert c.log_defaults.compression_zstd_level == 7  # the broker key is the topic key's default, as in Kafka
